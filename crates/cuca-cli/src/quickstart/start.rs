//! The project the quickstart's agent works on, as it was when the committed recording began:
//! a greeting with a typo and the check that catches it.

use std::path::Path;

/// The file the agent is to fix.
pub(crate) const GREETING: &str = "greeting.txt";
/// The check the agent runs: `sh check.sh`.
pub(crate) const CHECK: &str = "check.sh";

/// What `greeting.txt` holds at the start.
const GREETING_TEXT: &str = "helo world\n";

/// `check.sh` expecting `want`. It says on stderr what it found and what it expected, which
/// is all the scripted model reads.
pub(crate) fn check_script(want: &str) -> String {
    format!(
        "#!/bin/sh\n\
         # The project's check: the greeting must be right.\n\
         want='{want}'\n\
         have=$(cat greeting.txt)\n\
         if [ \"$have\" != \"$want\" ]; then\n  \
           echo \"greeting.txt says '$have', expected '$want'\" >&2\n  \
           exit 1\n\
         fi\n\
         echo \"greeting ok\"\n"
    )
}

/// What the recorded check expects.
pub(crate) const RECORDED_WANT: &str = "hello world";

/// Writes the starting files into `dir`, readable and writable by their owner and readable
/// by others whatever the umask, so that their snapshot (which keeps modes) is the same on
/// every machine.
pub(crate) fn write(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for (name, text) in [
        (GREETING, GREETING_TEXT.to_owned()),
        (CHECK, check_script(RECORDED_WANT)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}
