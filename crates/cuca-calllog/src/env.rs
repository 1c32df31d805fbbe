//! Where the log goes: the environment pins, the state root, and the file names.
//!
//! Every lookup goes through [`Env`], a plain value, so a test hands in its own and never
//! reads (or writes under) the environment of the person who started it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Switches the log off ([`OFF_VALUE`]) or moves it (any other non-empty value is the path of
/// the live file). Exported so the manual, the CLI and the code all say the same word.
pub const ENV_VAR: &str = "CUCA_CALL_LOG";

/// Adds the request and response bodies to every record. A separate pin and not a value of
/// [`ENV_VAR`] because the two answer different questions: where the log goes, and how much
/// of the person's own data it is allowed to hold. Any non-empty value other than `0`,
/// `false`, `no` or `off` turns it on.
pub const BODIES_ENV_VAR: &str = "CUCA_CALL_LOG_BODIES";

/// What [`ENV_VAR`] is set to to write nothing at all.
pub const OFF_VALUE: &str = "off";

/// Names the state root (where cuca keeps what it wrote down) outright. Without it the root is
/// `$XDG_STATE_HOME/cuca`, else `~/.local/state/cuca`.
pub const HOME_ENV_VAR: &str = "CUCA_HOME";

/// The folder the log lives in, under the profile directory or the state root: "where does
/// cuca keep what it wrote down" has one answer.
pub const DIR_NAME: &str = "logs";

/// The live log.
pub const FILE_NAME: &str = "calls.jsonl";

/// The one predecessor kept across a rotation.
pub const PREVIOUS_FILE_NAME: &str = "calls.1.jsonl";

/// Where the live file rotates when the bodies pin is off. Thirty-two mebibytes is a few
/// hundred thousand shape-only rows (weeks of ordinary use) and still small enough that a
/// person can grep the whole thing; the predecessor doubles the history without letting the
/// pair grow without bound.
pub const MAX_BYTES: u64 = 32 << 20;

/// Where the live file rotates when [`BODIES_ENV_VAR`] is on. A body-bearing row is tens to
/// hundreds of kilobytes, and [`MAX_BYTES`] would turn over after a few dozen calls — too soon
/// for the session that asked for the bodies. 256 MiB is hours of a real debug session rather
/// than minutes, and it still bounds the pair.
pub const BODIES_MAX_BYTES: u64 = 256 << 20;

/// The environment the log resolves its path from: a value, so it can be injected.
///
/// [`Env::from_process`] reads the real one; tests build their own with `Env::default()` and
/// set the fields, so nothing they do can land in the real state root.
///
/// ```
/// use cuca_calllog::Env;
/// use std::path::{Path, PathBuf};
///
/// let mut env = Env::default();
/// env.home = Some(PathBuf::from("/home/ada"));
/// assert_eq!(
///     env.path_for(None),
///     Some(PathBuf::from("/home/ada/.local/state/cuca/logs/calls.jsonl"))
/// );
/// assert_eq!(
///     env.path_for(Some(Path::new("/p"))),
///     Some(PathBuf::from("/p/logs/calls.jsonl"))
/// );
/// env.call_log = Some("off".into());
/// assert_eq!(env.path_for(None), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Env {
    /// The value of [`ENV_VAR`] (`CUCA_CALL_LOG`).
    pub call_log: Option<OsString>,
    /// The value of [`BODIES_ENV_VAR`] (`CUCA_CALL_LOG_BODIES`).
    pub bodies: Option<OsString>,
    /// The value of [`HOME_ENV_VAR`] (`CUCA_HOME`).
    pub cuca_home: Option<PathBuf>,
    /// The value of `XDG_STATE_HOME`. Ignored when relative, as the XDG spec says.
    pub xdg_state_home: Option<PathBuf>,
    /// The person's home directory (`HOME`).
    pub home: Option<PathBuf>,
    /// Set when this process is a cargo test or bench binary (see [`is_cargo_test_binary`]).
    /// Then [`Env::path_for`] answers `None` for any path inside the state root, so a test
    /// binary cannot write into the log of the person who started it; a test that wants a
    /// log names a temporary path (its own `Env`, or `CUCA_CALL_LOG` pointing outside the
    /// root).
    pub under_test: bool,
}

impl Env {
    /// The real environment of this process.
    ///
    /// [`Env::under_test`] is set when the executable is a test or bench binary cargo built
    /// (see [`is_cargo_test_binary`]). It is a safety net for a test that forgets to inject
    /// its own `Env`, not the way tests are meant to get one.
    pub fn from_process() -> Env {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        let under_test = std::env::current_exe()
            .ok()
            .is_some_and(|exe| is_cargo_test_binary(&exe));
        Env {
            call_log: var(ENV_VAR),
            bodies: var(BODIES_ENV_VAR),
            cuca_home: var(HOME_ENV_VAR).map(PathBuf::from),
            xdg_state_home: var("XDG_STATE_HOME").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
            under_test,
        }
    }

    /// Where cuca keeps what it wrote down: `$CUCA_HOME`, else `$XDG_STATE_HOME/cuca`, else
    /// `~/.local/state/cuca`. `None` when none of them is known.
    pub fn state_root(&self) -> Option<PathBuf> {
        if let Some(root) = nonempty(self.cuca_home.as_deref()) {
            return Some(root.to_path_buf());
        }
        if let Some(xdg) = nonempty(self.xdg_state_home.as_deref()).filter(|p| p.is_absolute()) {
            return Some(xdg.join("cuca"));
        }
        nonempty(self.home.as_deref()).map(|home| home.join(".local").join("state").join("cuca"))
    }

    /// Whether [`BODIES_ENV_VAR`] asks for the bodies.
    pub fn bodies(&self) -> bool {
        self.bodies.as_deref().is_some_and(|value| {
            let value = value.to_string_lossy();
            let value = value.trim();
            !value.is_empty()
                && !["0", "false", "no", "off"]
                    .iter()
                    .any(|no| value.eq_ignore_ascii_case(no))
        })
    }

    /// The live file for a profile directory (`dir`), or for the state root when there is
    /// none, with [`ENV_VAR`] on top: `None` when it says `off`, its value when it names a
    /// path. `None` too when nothing names a place to write (no root, no home), and, under
    /// test, for any path inside the state root. [`Env::off_reason`] says which.
    pub fn path_for(&self, dir: Option<&Path>) -> Option<PathBuf> {
        self.resolve(dir).ok()
    }

    /// Why [`Env::path_for`] answers `None` for `dir`, or `None` when the log is on: the
    /// words a "the call log is off" message should say, naming the real cause.
    ///
    /// ```
    /// use cuca_calllog::{Env, OffReason};
    /// let mut env = Env::default();
    /// assert_eq!(env.off_reason(None), Some(OffReason::NoStateRoot));
    /// env.home = Some("/home/ada".into());
    /// assert_eq!(env.off_reason(None), None);
    /// env.under_test = true;
    /// assert!(matches!(env.off_reason(None), Some(OffReason::UnderTest { .. })));
    /// ```
    pub fn off_reason(&self, dir: Option<&Path>) -> Option<OffReason> {
        self.resolve(dir).err()
    }

    fn resolve(&self, dir: Option<&Path>) -> Result<PathBuf, OffReason> {
        let pinned = self.call_log.as_ref().filter(|value| !value.is_empty());
        let path = match pinned {
            Some(value) if value.to_string_lossy().trim() == OFF_VALUE => {
                return Err(OffReason::SwitchedOff)
            }
            Some(value) => PathBuf::from(value),
            None => {
                let base = match nonempty(dir) {
                    Some(dir) => dir.to_path_buf(),
                    None => self.state_root().ok_or(OffReason::NoStateRoot)?,
                };
                base.join(DIR_NAME).join(FILE_NAME)
            }
        };
        if self.under_test {
            if let Some(root) = self.state_root() {
                if path.starts_with(&root) {
                    return Err(OffReason::UnderTest { path });
                }
            }
        }
        Ok(path)
    }
}

/// Why a log resolved from an [`Env`] writes nothing ([`Env::off_reason`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OffReason {
    /// [`ENV_VAR`] says [`OFF_VALUE`].
    SwitchedOff,
    /// Nothing names a state root: no `CUCA_HOME`, no absolute `XDG_STATE_HOME`, no `HOME`.
    NoStateRoot,
    /// This process is a cargo test or bench binary, and `path` is inside the state root,
    /// which a test binary never writes into.
    UnderTest {
        /// The file the log would otherwise have written.
        path: PathBuf,
    },
}

impl std::fmt::Display for OffReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffReason::SwitchedOff => write!(f, "{ENV_VAR}={OFF_VALUE}"),
            OffReason::NoStateRoot => write!(
                f,
                "no state root: none of {HOME_ENV_VAR}, XDG_STATE_HOME (absolute) or HOME is set"
            ),
            OffReason::UnderTest { path } => write!(
                f,
                "this program is a cargo test binary, and a test never writes into the state \
                 root ({}); set {ENV_VAR} to a path outside it",
                path.display()
            ),
        }
    }
}

/// Whether `exe` is a test or bench binary cargo built: `target/<profile>/deps/<crate>-<hash>`
/// where `<hash>` is cargo's 16 lowercase hex digits and the profile directory holds cargo's
/// `.cargo-lock`.
///
/// All three must hold. A directory named `deps` alone is no sign of a test: vendored trees
/// and Nix or Bazel layouts put real applications in one, and the call log must stay on for
/// them. Binaries cargo runs (`cargo run`, examples) sit outside `deps/`, and installed ones
/// have no `.cargo-lock` beside them.
pub fn is_cargo_test_binary(exe: &Path) -> bool {
    let Some(deps) = exe.parent() else {
        return false;
    };
    if deps.file_name().is_none_or(|name| name != "deps") {
        return false;
    }
    let Some(stem) = exe.file_stem().and_then(|s| s.to_str()) else {
        return false;
    };
    let hashed = stem.rsplit_once('-').is_some_and(|(name, hash)| {
        !name.is_empty()
            && hash.len() == 16
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    hashed
        && deps
            .parent()
            .is_some_and(|profile| profile.join(".cargo-lock").is_file())
}

/// The predecessor a rotation keeps for `live`: `calls.jsonl` becomes `calls.1.jsonl`, and a
/// pinned `trace.log` becomes `trace.1.log` beside it.
pub fn previous_path(live: &Path) -> PathBuf {
    let stem = live
        .file_stem()
        .map(|s| s.to_os_string())
        .unwrap_or_default();
    let mut name = stem;
    name.push(".1");
    if let Some(ext) = live.extension() {
        name.push(".");
        name.push(ext);
    }
    live.with_file_name(name)
}

fn nonempty(path: Option<&Path>) -> Option<&Path> {
    path.filter(|p| !p.as_os_str().is_empty())
}
