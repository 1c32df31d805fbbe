//! `cuca serve`: the `GET /runs/{id}/replay` route of `cuca_journal::serve::router`.

use std::io::Write;
use std::path::Path;

use crate::error::CliError;

/// Binds `listen`, prints the URL on stdout (flushed, so a supervisor or a test can read it),
/// then serves until the process is stopped.
pub(crate) fn run(runs: &Path, listen: &str) -> Result<(), CliError> {
    if !runs.is_dir() {
        return Err(CliError::Usage(format!(
            "runs directory {} is not a directory",
            runs.display()
        )));
    }
    // An address that does not parse (or resolve) is a bad argument, exit 2; one that parses
    // but cannot be bound (in use, not ours) is a failure, exit 1.
    if std::net::ToSocketAddrs::to_socket_addrs(listen).is_err() {
        return Err(CliError::Usage(format!(
            "--listen {listen:?} is not an address to listen on; give HOST:PORT, such as 127.0.0.1:8080"
        )));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
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
            let _ = out.flush();
        }
        axum::serve(listener, cuca::journal::serve::router(runs))
            .await
            .map_err(|error| CliError::Failed(format!("serve on {address}: {error}")))
    })
}
