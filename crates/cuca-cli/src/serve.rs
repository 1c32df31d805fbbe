//! `cuca serve`: the `GET /runs/{id}/replay` route of `cuca_serve::router`, under its limits.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use cuca_serve::ServeLimits;

use crate::error::CliError;

/// The arguments of `cuca serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The directory holding one subdirectory per run (`{id}/replay.json.gz`).
    #[arg(long)]
    runs: PathBuf,
    /// The address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// How long a client may take to send a request's head before it is closed.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: Duration,
    /// How long a connection may go with no byte moving either way before it is closed.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    idle_timeout: Duration,
    /// How many connections are served at once; more wait in the listen backlog.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Also serve the viewer's pages (`cuca view`) over these session directories, with the
    /// runs directory's runs; repeat for several directories.
    #[arg(long = "sessions", value_name = "DIR")]
    sessions: Vec<PathBuf>,
    /// With `--sessions`: the call log the viewer's call-log page summarises.
    #[arg(long, value_name = "FILE", requires = "sessions")]
    calls: Option<PathBuf>,
}

/// Binds `listen`, prints the URL on stdout (flushed, so a supervisor or a test can read it),
/// then serves until the process is stopped.
pub(crate) fn run(args: &ServeArgs) -> Result<(), CliError> {
    let runs = &args.runs;
    if !runs.is_dir() {
        return Err(CliError::Usage(format!(
            "runs directory {} is not a directory",
            runs.display()
        )));
    }
    // An address that does not parse (or resolve) is a bad argument, exit 2; one that parses
    // but cannot be bound (in use, not ours) is a failure, exit 1.
    if std::net::ToSocketAddrs::to_socket_addrs(args.listen.as_str()).is_err() {
        return Err(CliError::Usage(format!(
            "--listen {:?} is not an address to listen on; give HOST:PORT, such as 127.0.0.1:8080",
            args.listen
        )));
    }
    for dir in &args.sessions {
        if !dir.is_dir() {
            return Err(CliError::Usage(format!(
                "session directory {} is not a directory",
                dir.display()
            )));
        }
    }
    let max_connections = usize::try_from(args.max_connections).unwrap_or(usize::MAX);
    let limits = ServeLimits::new(args.header_timeout, args.idle_timeout, max_connections);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Failed(format!("start the async runtime: {error}")))?;
    let listen = &args.listen;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        let address = listener
            .local_addr()
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        // A server whose reader went away keeps serving: the URL lines are for whoever
        // started it, and a closed stdout is no reason to stop answering requests.
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on http://{address}");
            let _ = writeln!(
                out,
                "serving GET http://{address}/runs/{{id}}/replay from {}",
                runs.display()
            );
            if !args.sessions.is_empty() {
                let _ = writeln!(out, "viewer at http://{address}/");
            }
            let _ = out.flush();
        }
        let mut app = cuca_serve::router(runs);
        if !args.sessions.is_empty() {
            // The viewer's pages beside the record route: `/runs/{id}` is the viewer's page
            // of a run, `/runs/{id}/replay` the record itself.
            let mut config =
                cuca_view::ViewConfig::new(args.sessions.clone()).with_runs_dir(runs.clone());
            if let Some(calls) = &args.calls {
                config = config.with_call_log(calls);
            }
            app = app.merge(cuca_view::router(config));
            // The viewer's pages show sessions: the same Host and Origin rules as `cuca view`.
            let guard = cuca_serve::LocalOrigin::for_address(address);
            if guard.is_open() {
                eprintln!(
                    "{}",
                    crate::view::open_warning("cuca serve", address, "read")
                );
            }
            app = guard.layer(app, cuca_serve::Refusal::text);
        }
        cuca_serve::serve(listener, app, limits)
            .await
            .map_err(|error| CliError::Failed(format!("serve on {address}: {error}")))
    })
}
