//! `cuca proxy`: the recording and replaying OpenAI-compatible proxy of `cuca_proxy`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use cuca_proxy::{Mode, Proxy, ProxyConfig, DEFAULT_MAX_BODY_BYTES, DEFAULT_SESSION};

use crate::error::CliError;

/// `cuca proxy` arguments; `docs/proxy.md` has the long form.
#[derive(Debug, Args)]
pub(crate) struct ProxyArgs {
    /// The OpenAI-compatible server calls are forwarded to (`http://127.0.0.1:8080`, or a
    /// base ending in `/v1`); not needed in replay mode.
    #[arg(long)]
    upstream: Option<String>,
    /// The directory of `.cslog` sessions recorded into and replayed from (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// The address to listen on (loopback unless told otherwise; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:4000")]
    listen: String,
    /// record: forward and record; replay: answer from the recording, no network; auto:
    /// replay what is recorded, forward and record what is not.
    #[arg(long, default_value = "record", value_parser = ["record", "replay", "auto"])]
    mode: String,
    /// The session of a call that names none (by `/s/{session}/v1` or `X-Cuca-Session`).
    #[arg(long, default_value = DEFAULT_SESSION)]
    session: String,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
}

/// Binds `--listen`, prints the URL on stdout (flushed, so a supervisor or a test can read
/// it), then serves until the process is stopped.
pub(crate) fn run(args: &ProxyArgs) -> Result<(), CliError> {
    report_to_stderr();
    let mode: Mode = args
        .mode
        .parse()
        .map_err(|error: cuca_proxy::ProxyError| CliError::Usage(error.to_string()))?;
    let mut config = ProxyConfig::new(mode, args.upstream.clone())
        .map_err(|error| CliError::Usage(error.to_string()))?;
    config.default_session = args.session.clone();
    config.max_body_bytes = args.max_body_bytes;
    let backend = cuca::FileBackend::new(&args.dir).map_err(|error| {
        CliError::Usage(format!(
            "sessions directory {}: {error}",
            args.dir.display()
        ))
    })?;
    let proxy = Proxy::new(config, Arc::new(backend))
        .map_err(|error| CliError::Usage(error.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Failed(format!("start the async runtime: {error}")))?;
    runtime.block_on(async {
        let listen = &args.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        let address = listener
            .local_addr()
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        {
            // A closed stdout is no reason to stop proxying: the lines are for whoever
            // started the proxy.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on http://{address}");
            let upstream = args.upstream.as_deref().filter(|_| mode.forwards());
            let _ = writeln!(
                out,
                "mode {mode}, sessions in {}{}; point an OpenAI SDK at http://{address}/s/SESSION/v1",
                args.dir.display(),
                upstream.map_or(String::new(), |u| format!(", upstream {u}")),
            );
            let _ = out.flush();
        }
        proxy
            .serve(listener, std::future::pending())
            .await
            .map_err(|error| CliError::Failed(error.to_string()))
    })
}

/// Sends the proxy's warnings and errors to stderr, one line each: a call that could not be
/// recorded in full must say so where the person running the proxy looks (issue 28.3), not
/// only in the call log. `RUST_LOG` chooses another level.
fn report_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Another subscriber already installed (a test harness) is left in place.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .try_init();
}
