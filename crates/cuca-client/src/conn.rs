//! Connection tracing: whether an attempt rode a pooled connection, and what opening one cost.
//!
//! reqwest does not say whether a request reused a connection, but it lets a client wrap its
//! connector ([`reqwest::ClientBuilder::connector_layer`]) and its resolver
//! ([`reqwest::ClientBuilder::dns_resolver`]). [`TraceLayer`] times every connection the
//! pool opens and files it under the connection's local address; [`TimedResolver`] times the
//! lookup inside it. A response names the connection it came over (hyper's [`HttpInfo`]
//! carries both addresses), so [`ConnTrace::claim`] can tell an attempt whether its
//! connection was opened for it (`conn_reused: false`, with the timings) or was already in
//! the pool (`conn_reused: true`). Matching by address rather than by "the connect this
//! request started" matters: hyper races a new connect against the pool, and a connect a
//! request started may end up serving another request, or none.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// How many opened-but-unclaimed connections are remembered. A connection is claimed by the
/// first response that comes over it; one never used (a connect that lost hyper's race and
/// was closed idle) must not pin memory, and 64 is far more than a client keeps open.
const MAX_UNCLAIMED: usize = 64;

/// What opening one connection cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Opened {
    /// The name lookup, when there was one (an IP literal needs none).
    pub(crate) dns: Option<Duration>,
    /// From the resolved address to a ready connection: the TCP connect, and over https the
    /// TLS handshake as well (reqwest performs both in one step that cannot be split from
    /// outside it).
    pub(crate) connect: Duration,
}

/// How an attempt got its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnUse {
    /// The pool had it: nothing was opened for this attempt.
    Reused,
    /// It was opened for this attempt, at this cost.
    Fresh(Opened),
}

/// The connections a client's pool opened and no response has claimed yet.
#[derive(Debug, Default)]
pub(crate) struct ConnTrace {
    unclaimed: Mutex<VecDeque<(SocketAddr, Opened)>>,
}

impl ConnTrace {
    fn opened(&self, local: SocketAddr, opened: Opened) {
        let mut unclaimed = self
            .unclaimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A local address seen before belonged to a connection now closed (the port was
        // reused): the new one replaces it.
        unclaimed.retain(|(addr, _)| *addr != local);
        if unclaimed.len() == MAX_UNCLAIMED {
            unclaimed.pop_front();
        }
        unclaimed.push_back((local, opened));
    }

    /// How the response's connection came to be: opened for it (the first response over a
    /// connection claims it), or reused. `None` when the response names no connection.
    pub(crate) fn claim(&self, response: &reqwest::Response) -> Option<ConnUse> {
        let local = response.extensions().get::<HttpInfo>()?.local_addr();
        let mut unclaimed = self
            .unclaimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match unclaimed.iter().position(|(addr, _)| *addr == local) {
            Some(at) => Some(ConnUse::Fresh(unclaimed.remove(at)?.1)),
            None => Some(ConnUse::Reused),
        }
    }
}

tokio::task_local! {
    /// The lookup time of the connect being made on this task, filled by [`TimedResolver`].
    static DNS_TIME: Arc<Mutex<Option<Duration>>>;
}

/// The connector layer that files every opened connection in a [`ConnTrace`].
#[derive(Debug, Clone)]
pub(crate) struct TraceLayer(pub(crate) Arc<ConnTrace>);

impl<S> tower_layer::Layer<S> for TraceLayer {
    type Service = Traced<S>;

    fn layer(&self, inner: S) -> Traced<S> {
        Traced {
            inner,
            trace: Arc::clone(&self.0),
        }
    }
}

/// A connector that times what it opens.
#[derive(Debug, Clone)]
pub(crate) struct Traced<S> {
    inner: S,
    trace: Arc<ConnTrace>,
}

type Connecting<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, R> tower_service::Service<R> for Traced<S>
where
    S: tower_service::Service<R>,
    S::Response: Connection + Send + 'static,
    S::Error: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Connecting<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let trace = Arc::clone(&self.trace);
        let dns = Arc::new(Mutex::new(None));
        let started = Instant::now();
        // The lookup may run inside `call` or inside the future it returns: the probe is in
        // scope for both.
        let connecting = DNS_TIME.sync_scope(Arc::clone(&dns), || self.inner.call(request));
        let connecting = DNS_TIME.scope(Arc::clone(&dns), connecting);
        Box::pin(async move {
            let conn = connecting.await?;
            let total = started.elapsed();
            let connected = conn.connected();
            let mut extras = http::Extensions::new();
            connected.get_extras(&mut extras);
            if let Some(info) = extras.get::<HttpInfo>() {
                let dns = *dns.lock().unwrap_or_else(PoisonError::into_inner);
                trace.opened(
                    info.local_addr(),
                    Opened {
                        dns,
                        connect: total.saturating_sub(dns.unwrap_or_default()),
                    },
                );
            }
            Ok(conn)
        })
    }
}

/// The system resolver (`getaddrinfo` on a blocking thread, as reqwest's default does),
/// timed into the connect it serves.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TimedResolver;

impl Resolve for TimedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let probe = DNS_TIME.try_with(Arc::clone).ok();
        Box::pin(async move {
            let started = Instant::now();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if let Some(probe) = probe {
                *probe.lock().unwrap_or_else(PoisonError::into_inner) = Some(started.elapsed());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}
