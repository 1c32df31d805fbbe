//! `cuca run`: one command to record an agent. The proxy of `cuca proxy` starts
//! in-process on a free loopback port, COMMAND runs with the environment its SDK reads pointed
//! at it, and when COMMAND exits the proxy shuts down gracefully (every recording written)
//! and `cuca run` exits with COMMAND's status.

use std::ffi::OsString;

use clap::Args;

use crate::error::CliError;

/// The sessions directory when `--store` is not given.
pub(crate) const DEFAULT_DIR: &str = "cuca-sessions";

/// What a replaying proxy is called with when the caller has no key of its own: the SDKs
/// refuse to start without one, and a replay reaches no server that would check it.
const REPLAY_KEY: &str = "sk-cuca-replay";

/// `cuca run` arguments; `docs/agents.md` has the long form.
#[derive(Debug, Args)]
#[command(
    after_help = "COMMAND gets OPENAI_BASE_URL=http://127.0.0.1:PORT/s/SESSION/v1 and \
                  ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/s/SESSION (the Python and TypeScript \
                  openai and anthropic SDKs, the Agents SDK and Claude Code read them), \
                  CUCA_PROXY_URL and CUCA_SESSION. Codex reads no base URL from the environment: \
                  a COMMAND named codex that chooses no model_provider itself gets \
                  `-c model_provider=cuca -c model_providers.cuca={…base_url…}` before its own \
                  arguments (printed on stderr). In replay mode an unset OPENAI_API_KEY or \
                  ANTHROPIC_API_KEY is set to sk-cuca-replay. SIGTERM is passed on to COMMAND. \
                  Exit status: COMMAND's (128+N when a signal N ended it)."
)]
pub(crate) struct RunArgs {
    /// record: forward and record; replay: answer from the recording, no network; auto:
    /// replay what is recorded, forward and record what is not; fork: replay what matches,
    /// and from the first call that differs run live, recorded in a fork of the recording.
    #[arg(long, default_value = "record", value_parser = ["record", "replay", "auto", "fork"])]
    mode: String,
    /// What replay compares.
    #[command(flatten)]
    matching: crate::proxy::MatchingArgs,
    /// Strict replay for CI (`docs/ci.md`).
    #[command(flatten)]
    strict: crate::strict::StrictArgs,
    /// How old a replayed recording may be.
    #[command(flatten)]
    expiry: crate::strict::ExpiryArgs,
    /// Fork mode onto another model.
    #[command(flatten)]
    swap: crate::swap::SwapArgs,
    /// What is redacted before it is recorded.
    #[command(flatten)]
    redaction: crate::redaction::RedactionArgs,
    /// The session recorded into or replayed (default in record mode: `run-{UTC time}`;
    /// replay and auto need it).
    #[arg(long)]
    session: Option<String>,
    /// Where the session is recorded into or replayed from: a directory of `.cslog` files
    /// (created if missing), or a PostgreSQL URL (`postgres://user@host:port/db`, with
    /// `--schema`) a fleet shares, as `cuca proxy --store` takes. `--dir` is the same flag.
    #[arg(long, alias = "dir", value_name = "STORE", default_value = DEFAULT_DIR)]
    store: crate::store::StoreArg,
    /// The model server calls are forwarded to (`http://127.0.0.1:8080`); record and auto
    /// need it.
    #[arg(long)]
    upstream: Option<String>,
    /// The address the proxy listens on, as `cuca proxy --listen` takes it (default: a free
    /// loopback port); a fixed port lets another process reach the same proxy.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: String,
    /// The workspace recorded and restored.
    #[command(flatten)]
    workspace: crate::workspace::RunWorkspaceArgs,
    /// The agent to run and its arguments.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// The session of a record run that names none: `run-` and the UTC time to the second, in
/// the compact form (`run-20261201T133501Z`: no `:`, which a point id reserves).
fn default_session() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = now.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    format!("run-{compact}")
}

/// The arguments that point Codex at the proxy, when COMMAND is `codex` and does not choose
/// a model provider itself: Codex reads no base URL from the environment (0.171.0 ignores
/// `OPENAI_BASE_URL`), so it gets a provider `cuca` on its command line, before its
/// subcommand, speaking Responses (the one wire API it has) with the caller's
/// `OPENAI_API_KEY` when there is one (always in replay mode, which sets a placeholder).
fn codex_provider(
    program: &OsString,
    rest: &[OsString],
    base_url: &str,
    mode: cuca_proxy::Mode,
) -> Option<[String; 4]> {
    let name = std::path::Path::new(program).file_name()?;
    let chooses = rest
        .iter()
        .any(|arg| arg.to_string_lossy().contains("model_provider"));
    if name != "codex" || chooses {
        return None;
    }
    let key = if !mode.forwards() || std::env::var_os("OPENAI_API_KEY").is_some() {
        r#",env_key="OPENAI_API_KEY""#
    } else {
        ""
    };
    // Replayed, the same request gets the same answer every time: Codex's own retries (five
    // for a stream, with back-off) would only keep a divergence from its user for seconds.
    // It does not read `x-should-retry`, so its provider is told to retry nothing.
    let retries = if mode == cuca_proxy::Mode::Replay {
        ",request_max_retries=0,stream_max_retries=0"
    } else {
        ""
    };
    Some([
        "-c".into(),
        "model_provider=cuca".into(),
        "-c".into(),
        format!(
            r#"model_providers.cuca={{name="cuca",base_url="{base_url}",wire_api="responses"{key}{retries}}}"#
        ),
    ])
}

/// Runs `cuca run`: the proxy, COMMAND under it, then the proxy's graceful stop. Returns
/// COMMAND's exit code as [`CliError::Exit`] when it is not 0.
pub(crate) fn run(args: RunArgs, schema: Option<&str>) -> Result<(), CliError> {
    let session = match (&args.session, args.mode.as_str()) {
        (Some(session), _) => session.clone(),
        (None, "record") => default_session(),
        (None, mode) => {
            return Err(CliError::Usage(format!(
                "{mode} mode replays a recorded session: name it with --session (cuca sessions STORE lists them)"
            )))
        }
    };
    crate::proxy::report_to_stderr();
    let mut config = crate::proxy::config(&args.mode, args.upstream.clone(), &session)?;
    args.matching.apply(&mut config)?;
    args.swap.apply(&mut config)?;
    args.redaction.apply(&mut config)?;
    let mode = config.mode;
    args.strict.check_mode(mode)?;
    let store = args.store.open_for_recording(schema)?;
    let age = if mode == cuca_proxy::Mode::Record {
        None
    } else {
        args.expiry.check(&store, &session, mode)?
    };
    if age.as_ref().is_some_and(crate::strict::Age::stops) {
        // An expired recording under `--on-expiry fail`: COMMAND is not run against it.
        let nothing = cuca_proxy::ReplayReport::default();
        return crate::strict::finish(&args.strict, "cuca run", &nothing, age.as_ref());
    }
    // As `cuca proxy`: a database may restart under a run, and the agent is answered all the
    // same (the call log and stderr say what was not recorded).
    config.answer_unrecorded = store.file().is_none();
    let proxy = crate::proxy::open_store(config, &store)?;
    let prepared =
        crate::workspace::prepare(&args.workspace, &args.store, &store, mode, &session, &proxy)?;
    let runtime = crate::proxy::runtime()?;
    let reporter = proxy.clone();
    let (status, replayed) = runtime.block_on(async {
        let listen = &args.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        let address = listener
            .local_addr()
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        if cuca_serve::LocalOrigin::for_address(address).is_open() {
            eprintln!(
                "{}",
                crate::view::open_warning("cuca run", address, "record into and replay")
            );
        }
        let base = format!("http://{address}");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(proxy.serve(listener, async {
            let _ = stopped.await;
        }));
        let (program, rest) = args
            .command
            .split_first()
            .ok_or_else(|| CliError::Usage("no COMMAND to run after --".into()))?;
        let mut command =
            std::process::Command::new(crate::workspace::program(program, prepared.as_ref()));
        let provider = codex_provider(program, rest, &format!("{base}/s/{session}/v1"), mode);
        if let Some(provider) = &provider {
            eprintln!(
                "cuca run: Codex reads no base URL from the environment: giving it {}",
                provider.join(" ")
            );
            command.args(provider);
        }
        command
            .args(rest)
            .env("OPENAI_BASE_URL", format!("{base}/s/{session}/v1"))
            .env("ANTHROPIC_BASE_URL", format!("{base}/s/{session}"))
            .env("CUCA_PROXY_URL", &base)
            .env("CUCA_SESSION", &session);
        if let Some(prepared) = &prepared {
            command.envs(prepared.env.iter().map(|(key, value)| (key, value)));
            if let Some(cwd) = &prepared.cwd {
                command.current_dir(cwd);
            }
        }
        if !mode.forwards() {
            for key in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
                if std::env::var_os(key).is_none() {
                    command.env(key, REPLAY_KEY);
                }
            }
        }
        eprintln!(
            "cuca run: {mode} session {session} in {}, proxy on {base}",
            store.describe()
        );
        let shown = program.to_string_lossy().into_owned();
        // Watched before COMMAND starts: a SIGTERM that comes as soon as COMMAND is up must
        // find the watch in place, not the default action that would end cuca run at once.
        let signals = watch_signals();
        let waited = match command.spawn() {
            Ok(mut child) => {
                // cuca run lives on until COMMAND has exited, so that what it recorded is
                // closed properly: SIGINT from a terminal reaches COMMAND itself (one process
                // group), SIGTERM sent to cuca run alone (a supervisor, `timeout`) is passed on.
                let _signals = signals.map(|signals| pass_signals_on(signals, child.id()));
                tokio::task::spawn_blocking(move || child.wait()).await
            }
            Err(error) => Ok(Err(error)),
        };
        // The proxy stops whatever became of COMMAND: calls in flight get the grace, then
        // each recording writes its last record before serve returns.
        let _ = stop.send(());
        let served = serving.await;
        let status = waited
            .map_err(|error| CliError::Failed(format!("wait for {shown}: {error}")))?
            .map_err(|error| CliError::Failed(format!("run {shown}: {error}")))?;
        match served {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(CliError::Failed(error.to_string())),
            Err(error) => return Err(CliError::Failed(format!("the proxy stopped: {error}"))),
        }
        let replayed = if args.strict.wanted() {
            Some(reporter.replay_report(std::slice::from_ref(&session)).await)
        } else {
            None
        };
        Ok::<_, CliError>((status, replayed))
    })?;
    eprintln!(
        "cuca run: session {session} in {}; look at it with:",
        store.describe()
    );
    let typed = store.command_form();
    eprintln!("  cuca view {typed}");
    eprintln!("  cuca replay {typed} {session}");
    let checked = match &replayed {
        Some(report) => crate::strict::finish(&args.strict, "cuca run", report, age.as_ref()),
        None => Ok(()),
    };
    // COMMAND's own failure comes first: it said what it had to, and its status is kept.
    match crate::error::process_exit_code(status) {
        0 => checked,
        code => Err(CliError::Exit(code)),
    }
}

/// While COMMAND (process `pid`) runs: SIGINT is watched and dropped (no longer fatal to
/// `cuca run`; COMMAND got its own from the terminal), SIGTERM is sent on to COMMAND with
/// kill(1), this crate having no unsafe code to call kill(2). Ends with the returned task.
fn pass_signals_on(signals: Signals, pid: u32) -> AbortOnDrop {
    let (mut interrupt, mut terminate) = signals;
    AbortOnDrop(tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(()) = interrupt.recv() => {}
                Some(()) = terminate.recv() => {
                    // COMMAND may have exited meanwhile: kill then fails, and that is fine.
                    let _ = tokio::task::spawn_blocking(move || {
                        std::process::Command::new("kill")
                            .args(["-TERM", &pid.to_string()])
                            .stderr(std::process::Stdio::null())
                            .status()
                    })
                    .await;
                }
                else => break,
            }
        }
    }))
}

/// SIGINT and SIGTERM, watched.
type Signals = (tokio::signal::unix::Signal, tokio::signal::unix::Signal);

/// Starts watching SIGINT and SIGTERM (from then on neither ends `cuca run`); `None` when
/// they cannot be watched.
fn watch_signals() -> Option<Signals> {
    use tokio::signal::unix::{signal, SignalKind};
    Some((
        signal(SignalKind::interrupt()).ok()?,
        signal(SignalKind::terminate()).ok()?,
    ))
}

/// The signal task, stopped once COMMAND has been reaped (its pid may then be reused).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
