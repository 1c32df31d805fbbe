//! `cuca view`: the local web viewer of `cuca-view` over session directories, a call log and
//! journal runs.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::error::CliError;
use crate::store::StoreArg;

/// `cuca view STORE… [--store STORE…] [--listen ADDR] [--calls FILE] [--runs DIR]`.
#[derive(Debug, Args)]
pub(crate) struct ViewArgs {
    /// Stores of sessions to show: directories of `.cslog` files, or PostgreSQL URLs.
    #[arg(value_name = "STORE", required_unless_present = "store")]
    dirs: Vec<StoreArg>,
    /// A store to show (repeatable), as a positional STORE: `--store postgres://…` shows
    /// what every proxy of a fleet recorded there.
    #[arg(long, value_name = "STORE")]
    store: Vec<StoreArg>,
    /// The address to listen on; loopback by default (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// The call log to summarise (default: this machine's call log, when there is one).
    #[arg(long)]
    calls: Option<PathBuf>,
    /// A directory of journal runs (`{run}/replay.json.gz`) to show.
    #[arg(long)]
    runs: Option<PathBuf>,
}

/// Binds, prints the URL on stdout (flushed, so a person or a test can read it), then serves
/// until the process is stopped.
pub(crate) fn run(args: ViewArgs, schema: Option<&str>) -> Result<(), CliError> {
    let mut dirs = Vec::new();
    let mut stores = Vec::new();
    for store in args.dirs.iter().chain(&args.store) {
        match store {
            StoreArg::Dir(dir) if !dir.is_dir() => {
                return Err(CliError::Usage(format!(
                    "session directory {} is not a directory",
                    dir.display()
                )))
            }
            StoreArg::Dir(dir) => dirs.push(dir.clone()),
            other => {
                let opened = other.open(schema, false)?;
                // A database keeps its workspace objects itself: the turns' file diffs are
                // read from there. Without them the pages list the changes and say why.
                let objects = match crate::objects::objects_for(other, &opened) {
                    Ok(objects) => Some(objects),
                    Err(error) => {
                        crate::ui::warn(&format!("the pages show no file diffs: {error}"));
                        None
                    }
                };
                stores.push((opened, objects));
            }
        }
    }
    if let Some(runs) = &args.runs {
        if !runs.is_dir() {
            return Err(CliError::Usage(format!(
                "runs directory {} is not a directory",
                runs.display()
            )));
        }
    }
    let listen: std::net::SocketAddr = args.listen.parse().map_err(|error| {
        CliError::Usage(format!(
            "--listen {:?} is not an address like 127.0.0.1:8080: {error}",
            args.listen
        ))
    })?;
    let mut config = cuca_view::ViewConfig::new(dirs);
    for (store, objects) in &stores {
        config = config.with_store(store.describe(), store.shared());
        if let Some(objects) = objects {
            config = config.with_store_objects(store.describe(), std::sync::Arc::clone(objects));
        }
    }
    let calls = args
        .calls
        .clone()
        .or_else(|| cuca::calllog::Env::from_process().path_for(None));
    if let Some(calls) = calls {
        config = config.with_call_log(calls);
    }
    if let Some(runs) = &args.runs {
        config = config.with_runs_dir(runs);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| CliError::Failed(format!("start the async runtime: {error}")))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        let address = listener
            .local_addr()
            .map_err(|error| CliError::Failed(format!("listen on {listen}: {error}")))?;
        {
            // A closed stdout is no reason to stop serving: the line is for whoever started it.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "cuca view: http://{address}/");
            let _ = out.flush();
        }
        let guard = cuca_serve::LocalOrigin::for_address(address);
        if guard.is_open() {
            eprintln!("{}", open_warning("cuca view", address, "read"));
        }
        // The same limits as `cuca serve`: header-read and idle timeouts and a connection cap,
        // so slow or silent clients cannot hold the viewer.
        cuca_serve::serve(
            listener,
            guard.layer(cuca_view::router(config), cuca_serve::Refusal::text),
            cuca_serve::ServeLimits::default(),
        )
        .await
        .map_err(|error| CliError::Failed(format!("serve on {address}: {error}")))
    })
}

/// The stderr warning of a server asked to listen beyond loopback.
pub(crate) fn open_warning(server: &str, address: std::net::SocketAddr, what: &str) -> String {
    format!(
        "{server}: warning: listening on {address}, beyond loopback, with no authentication: \
         anyone who can reach this address can {what} your sessions"
    )
}
