//! `cuca proxy`: the recording and replaying OpenAI-compatible proxy of `cuca_proxy`.

use std::io::Write;
use std::time::Duration;

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
    /// Where sessions are recorded into and replayed from: a directory of `.cslog` files
    /// (created if missing), or a PostgreSQL URL (`postgres://user@host:port/db`, with
    /// `--schema`) that several proxies share. `--dir` is the same flag.
    #[arg(long, alias = "dir", value_name = "STORE")]
    store: crate::store::StoreArg,
    /// The address to listen on (loopback unless told otherwise; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:4000")]
    listen: String,
    /// A workspace to snapshot before every recorded call (into `STORE/.cuca-workspace`);
    /// `cuca checkout` restores it.
    #[arg(long, value_name = "DIR")]
    workspace: Option<std::path::PathBuf>,
    /// With --workspace: files larger than this many bytes are left out of snapshots.
    #[arg(long, value_name = "BYTES", default_value_t = cuca_workspace::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// record: forward and record; replay: answer from the recording, no network; auto:
    /// replay what is recorded, forward and record what is not; fork: replay what matches,
    /// and from the first call that differs run live, recorded in a fork of the recording.
    #[arg(long, default_value = "record", value_parser = ["record", "replay", "auto", "fork"])]
    mode: String,
    /// What replay compares.
    #[command(flatten)]
    matching: MatchingArgs,
    /// Strict replay for CI (`docs/ci.md`): checked when the proxy shuts down.
    #[command(flatten)]
    strict: crate::strict::StrictArgs,
    /// Fork mode onto another model.
    #[command(flatten)]
    swap: crate::swap::SwapArgs,
    /// What is redacted before it is recorded.
    #[command(flatten)]
    redaction: crate::redaction::RedactionArgs,
    /// The session of a call that names none (by `/s/{session}/v1` or `X-Cuca-Session`).
    #[arg(long, default_value = DEFAULT_SESSION)]
    session: String,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// How long a caller may take to send a request's head before it is closed.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: Duration,
    /// How long a caller may take to send a request's body before it gets a 408.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    body_timeout: Duration,
    /// How long a connection may go with no byte moving either way before it is closed; long,
    /// since a model may prefill for minutes before its first byte.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    idle_timeout: Duration,
    /// How many caller connections are served at once.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// On SIGINT or SIGTERM, how long calls in flight may run on before they are closed.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
}

/// What replay compares a request with the recording by (`docs/proxy.md`, "Matching and
/// divergence"); `cuca proxy` and `cuca run` both take these.
#[derive(Debug, Args)]
pub(crate) struct MatchingArgs {
    /// A regular expression whose matches replay blanks on both sides before comparing
    /// (repeatable): what differs on every run by nature.
    #[arg(long = "ignore", value_name = "REGEX")]
    ignore: Vec<String>,
    /// Drop the default patterns (Codex's Chunk ID and Wall time, ISO dates and times,
    /// /tmp paths).
    #[arg(long)]
    no_default_ignore: bool,
    /// Do not compare sampling parameters (temperature, max_tokens, seed, …).
    #[arg(long)]
    ignore_params: bool,
    /// A JSON path of a request field replay leaves out on both sides (repeatable):
    /// `$.metadata.request_id`, `$.a[*].b`, `$.a[0]`, `$['a-b']` — a field that changes on
    /// every run.
    #[arg(long = "ignore-json-path", value_name = "PATH")]
    ignore_json_path: Vec<String>,
}

impl MatchingArgs {
    /// Puts these into `config`; a pattern that is not a regular expression is a usage error.
    pub(crate) fn apply(&self, config: &mut ProxyConfig) -> Result<(), CliError> {
        if self.no_default_ignore {
            config.ignore.clear();
        }
        config.ignore.extend(self.ignore.iter().cloned());
        config.compare_parameters = !self.ignore_params;
        config
            .ignore_json_paths
            .extend(self.ignore_json_path.iter().cloned());
        config
            .validate()
            .map_err(|error| CliError::Usage(error.to_string()))
    }
}

/// Resolves on the first SIGINT or SIGTERM; never, when neither can be watched (the proxy
/// then runs until it is killed, as before).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut interrupt), Ok(mut terminate)) => {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// Binds `--listen`, prints the URL on stdout (flushed, so a supervisor or a test can read
/// it), then serves until SIGINT or SIGTERM, and shuts down gracefully: calls in flight get
/// the grace, then each left closes its turn; the exit code is 0.
pub(crate) fn run(args: &ProxyArgs, schema: Option<&str>) -> Result<(), CliError> {
    report_to_stderr();
    let mut config = config(&args.mode, args.upstream.clone(), &args.session)?;
    let mode = config.mode;
    config.max_body_bytes = args.max_body_bytes;
    config.header_read_timeout = args.header_timeout;
    config.body_read_timeout = args.body_timeout;
    config.idle_timeout = args.idle_timeout;
    config.max_connections = usize::try_from(args.max_connections).unwrap_or(usize::MAX);
    config.shutdown_grace = args.shutdown_grace;
    args.matching.apply(&mut config)?;
    args.strict.check_mode(mode)?;
    args.swap.apply(&mut config)?;
    args.redaction.apply(&mut config)?;
    let store = args.store.open_for_recording(schema)?;
    // A database may restart under a running fleet: its callers are answered all the same.
    config.answer_unrecorded = store.file().is_none();
    let proxy = open_store(config, &store)?;
    if let Some(dir) = &args.workspace {
        crate::workspace::watch(&proxy, dir, &args.store, &store, args.max_file_bytes)?;
    }
    let runtime = runtime()?;
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
            let swap = proxy.config().model_swap.as_ref().map_or(String::new(), |swap| {
                format!(", calls from {} on sent to {}", swap.from, swap.model)
            });
            let _ = writeln!(
                out,
                "mode {mode}{swap}, sessions in {}{}; point an OpenAI SDK at http://{address}/s/SESSION/v1",
                store.describe(),
                upstream.map_or(String::new(), |u| format!(", upstream {u}")),
            );
            let _ = writeln!(
                out,
                "Anthropic SDKs and Claude Code: ANTHROPIC_BASE_URL=http://{address}/s/SESSION (no /v1: the SDK adds it); \
                 Codex: cuca run -- codex …, or -c 'model_providers.cuca={{name=\"cuca\",base_url=\"http://{address}/s/SESSION/v1\",wire_api=\"responses\"}}' -c model_provider=cuca"
            );
            let _ = out.flush();
        }
        if cuca_serve::LocalOrigin::for_address(address).is_open() {
            eprintln!("{}", crate::view::open_warning("cuca proxy", address, "record into and replay"));
        }
        let watcher = proxy.clone();
        let shutdown = async move {
            stop_signal().await;
            eprintln!(
                "cuca proxy: shutting down, closing {} calls in flight",
                watcher.in_flight()
            );
        };
        let reporter = proxy.clone();
        proxy
            .serve(listener, shutdown)
            .await
            .map_err(|error| CliError::Failed(error.to_string()))?;
        if args.strict.wanted() {
            let report = reporter.replay_report(&[]).await;
            crate::strict::finish(&args.strict, "cuca proxy", &report, None)?;
        }
        Ok(())
    })
}

/// The proxy's config for `mode` (`record`, `replay` or `auto`) in front of `upstream`, calls
/// that name no session going to `session`, the rest at their defaults; a bad value is a
/// usage error. `cuca proxy` and `cuca run` both start here.
pub(crate) fn config(
    mode: &str,
    upstream: Option<String>,
    session: &str,
) -> Result<ProxyConfig, CliError> {
    let mode: Mode = mode
        .parse()
        .map_err(|error: cuca_proxy::ProxyError| CliError::Usage(error.to_string()))?;
    let mut config =
        ProxyConfig::new(mode, upstream).map_err(|error| CliError::Usage(error.to_string()))?;
    config.default_session = session.to_owned();
    config
        .validate()
        .map_err(|error| CliError::Usage(error.to_string()))?;
    Ok(config)
}

/// The proxy over an open store, `config` checked first.
pub(crate) fn open_store(
    config: ProxyConfig,
    store: &crate::store::Store,
) -> Result<Proxy, CliError> {
    config
        .validate()
        .map_err(|error| CliError::Usage(error.to_string()))?;
    Proxy::new(config, store.shared()).map_err(|error| CliError::Usage(error.to_string()))
}

/// The multi-threaded runtime the proxy serves on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Failed(format!("start the async runtime: {error}")))
}

/// Sends the proxy's warnings and errors to stderr, one line each: a call that could not be
/// recorded in full must say so where the person running the proxy looks, not
/// only in the call log. `RUST_LOG` chooses another level.
pub(crate) fn report_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Another subscriber already installed (a test harness) is left in place.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour escapes only on a terminal, and never under `NO_COLOR`: a stderr sent to a
        // file keeps plain words.
        .with_ansi(crate::ui::color())
        .with_target(false)
        .without_time()
        .try_init();
}
