//! The accept loop every cuca HTTP server runs: header-read and idle timeouts, a connection cap.
//!
//! `axum::serve` has neither a header-read timeout nor an idle timeout nor a cap: 200 half-sent
//! requests stayed open for as long as their clients liked, and each held its buffers. This loop
//! serves an axum [`Router`] over hyper's HTTP/1 connection directly so the three bounds hold.
//!
//! At the cap, a new connection is not left in the backlog behind the ones holding the server:
//! the oldest connection that has not yet sent a whole request head is closed to make room.
//! 1,100 half-sent heads would otherwise keep a real caller waiting a header-read timeout per
//! cap's worth of them; shed, they cost the real caller nothing.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tower_service::Service;

/// hyper's per-connection buffer ceiling, read and write.
///
/// hyper's default (about 400 KiB) is what a stalled client can pin per connection; 128 KiB
/// holds two 64 KiB body chunks and any request head this server answers.
const MAX_BUF_BYTES: usize = 128 * 1024;

/// How long the accept loop pauses after an error that is not one connection's (out of file
/// descriptors, say), so it does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The bounds a server keeps against slow and hostile clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeLimits {
    /// How long a client may take to send a request's head (line and headers). A half-sent
    /// request is closed after this.
    pub header_read_timeout: Duration,
    /// How long a connection may go without a byte moving either way: a client that neither
    /// sends nor reads (keep-alive idle, or a response it never takes) is closed after this.
    pub idle_timeout: Duration,
    /// How many connections are served at once. Beyond it, a new connection closes the oldest
    /// one that has not sent a whole request head yet; when every connection has, new ones
    /// wait in the listen backlog until one ends. The server's memory and file descriptors are
    /// bounded by this many.
    pub max_connections: usize,
}

impl ServeLimits {
    /// 10 s for a request head: ample on any real network, and what a slowloris client gets.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// 60 s without progress: a person's browser tab keeps its connection, a dead one goes.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// 64 connections: a few clients' worth of browsers and scripts, and at about 200 KiB per
    /// stalled connection (hyper's bounded buffers, one chunk, the decoder) a ceiling of a few
    /// tens of MiB whatever the clients do.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

    /// The limits with every field set; `max_connections` of 0 is taken as 1.
    pub fn new(
        header_read_timeout: Duration,
        idle_timeout: Duration,
        max_connections: usize,
    ) -> Self {
        ServeLimits {
            header_read_timeout,
            idle_timeout,
            max_connections: max_connections.max(1),
        }
    }
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits::new(
            Self::DEFAULT_HEADER_READ_TIMEOUT,
            Self::DEFAULT_IDLE_TIMEOUT,
            Self::DEFAULT_MAX_CONNECTIONS,
        )
    }
}

/// Serves `app` on `listener` until the accept loop fails for good (it does not on its own:
/// per-connection errors and resource exhaustion are logged and outlasted).
///
/// Each connection is HTTP/1.1 with hyper's header-read timeout, a 128 KiB buffer ceiling and an
/// idle watchdog; at most `limits.max_connections` are open at once.
pub async fn serve(listener: TcpListener, app: Router, limits: ServeLimits) -> io::Result<()> {
    serve_with_shutdown(listener, app, limits, std::future::pending()).await
}

/// [`serve`], returning when `shutdown` completes: the listener is closed, so nothing new is
/// accepted. Connections in progress are not cut: they are tasks on the runtime and run on
/// until they end or the runtime is dropped, so a server that wants to let them finish keeps
/// the runtime for as long as it likes.
pub async fn serve_with_shutdown(
    listener: TcpListener,
    app: Router,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(Open::default());
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return Ok(()),
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                tracing::error!(error = %err, "accepting a connection failed; retrying");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let permit = match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // At the cap: make room by closing a connection that is only holding a place,
                // then wait for its permit (or any other) to come back.
                open.shed_oldest_headless();
                tokio::select! {
                    permit = Arc::clone(&permits).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        // The semaphore is never closed; if it were, nothing more could be served.
                        Err(_) => return Ok(()),
                    },
                    () = &mut shutdown => return Ok(()),
                }
            }
        };
        let app = app.clone();
        let open = Arc::clone(&open);
        tokio::spawn(async move {
            let (id, conn) = open.insert();
            serve_connection(stream, app, limits, &conn).await;
            open.remove(id);
            drop(permit);
        });
    }
}

/// One open connection, as the accept loop sees it.
#[derive(Default)]
struct Conn {
    /// Set once hyper has read a whole request head on it: from then on it is serving someone.
    headed: AtomicBool,
    /// Woken to close the connection at once.
    shed: Notify,
}

/// The open connections, oldest first.
#[derive(Default)]
struct Open {
    conns: Mutex<BTreeMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
}

impl Open {
    fn insert(&self) -> (u64, Arc<Conn>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::default());
        self.lock().insert(id, Arc::clone(&conn));
        (id, conn)
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Closes the oldest connection that has not sent a whole request head, if there is one.
    fn shed_oldest_headless(&self) {
        let mut conns = self.lock();
        let victim = conns
            .iter()
            .find(|(_, conn)| !conn.headed.load(Ordering::Relaxed))
            .map(|(id, _)| *id);
        if let Some(conn) = victim.and_then(|id| conns.remove(&id)) {
            tracing::debug!("at the connection cap: closing a connection with no request head");
            // `notify_one` keeps the wake-up if the task is not waiting yet.
            conn.shed.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Conn>>> {
        // The map is changed only under this lock and never across an await.
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Errors that concern one connection only; the loop goes on at once.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

async fn serve_connection(stream: TcpStream, app: Router, limits: ServeLimits, conn: &Arc<Conn>) {
    let _ = stream.set_nodelay(true);
    let clock = Arc::new(Progress::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        progress: Arc::clone(&clock),
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_BUF_BYTES);
    // hyper calls the service once a request's head is whole: that is when the connection
    // stops being one the accept loop may shed.
    let headed = Arc::clone(conn);
    let service = hyper::service::service_fn(move |request| {
        headed.headed.store(true, Ordering::Relaxed);
        let mut app = app.clone();
        app.call(request)
    });
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    loop {
        let deadline = clock.last() + limits.idle_timeout;
        tokio::select! {
            () = conn.shed.notified() => return,
            result = connection.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(deadline) => {
                if clock.last() + limits.idle_timeout <= Instant::now() {
                    // Dropping the connection closes the socket: nothing moved for the whole
                    // idle timeout, in either direction.
                    tracing::debug!("closing an idle connection");
                    return;
                }
            }
        }
    }
}

/// When bytes last moved on a connection, as milliseconds since it opened.
struct Progress {
    start: Instant,
    last_ms: AtomicU64,
}

impl Progress {
    fn new() -> Self {
        Progress {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A stream that records progress: any byte read or written resets the idle clock.
struct Watched {
    inner: TcpStream,
    progress: Arc<Progress>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.progress.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.progress.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.progress.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_of_zero_connections_is_taken_as_one() {
        let limits = ServeLimits::new(Duration::from_secs(1), Duration::from_secs(2), 0);
        assert_eq!(limits.max_connections, 1);
        assert_eq!(
            ServeLimits::default(),
            ServeLimits::new(
                Duration::from_secs(10),
                Duration::from_secs(60),
                ServeLimits::DEFAULT_MAX_CONNECTIONS
            )
        );
    }
}
