//! `cuca completions SHELL`: the shell's completion script for every command and option,
//! generated from the same definitions clap parses with, so it never falls behind them; for
//! bash and fish, followed by the lines that complete session ids from the store typed
//! before them (`cuca complete-sessions STORE`). clap_complete's scripts are static: they
//! cannot ask the store, so those lines are written here.

use std::io::Write;

use crate::error::CliError;

/// Writes `shell`'s completion script for `cuca` to stdout (`cuca completions bash >
/// ~/.local/share/bash-completion/completions/cuca`).
pub(crate) fn write(shell: clap_complete::Shell) -> Result<(), CliError> {
    let mut command = crate::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "cuca", &mut script);
    match shell {
        clap_complete::Shell::Bash => script.extend_from_slice(BASH_SESSIONS.as_bytes()),
        clap_complete::Shell::Fish => script.extend_from_slice(FISH_SESSIONS.as_bytes()),
        _ => {}
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}

/// `cuca complete-sessions STORE`: the store's session ids, one a line.
pub(crate) fn sessions(store: &crate::store::Store) -> Result<(), CliError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for id in store.backend().sessions()? {
        // A session id with a control character cannot be typed back; it is left out.
        if !id.chars().any(char::is_control) {
            writeln!(out, "{id}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Bash: after the store, the commands that take a session (and `fork`, a point: the session
/// then `:`) complete session ids; everything else is clap's `_cuca`. The words are taken
/// from the line itself, as bash splits session ids (and PostgreSQL URLs) at `:` otherwise;
/// only the part after the word's last `:` is offered, which is what bash replaces.
const BASH_SESSIONS: &str = r#"
_cuca_sessions() {
    local line="${COMP_LINE:0:COMP_POINT}"
    local -a words
    read -ra words <<< "${line}"
    local cur=""
    [[ "${line}" == *" " ]] || { cur="${words[-1]}"; unset 'words[-1]'; }
    case "${words[1]}" in
        show|replay|export|repair|verify|compact|diff|fork) ;;
        *) _cuca "$@"; return ;;
    esac
    local store="" word
    for word in "${words[@]:2}"; do
        case "${word}" in
            -*) ;;
            *) store="${word}"; break ;;
        esac
    done
    if [[ -z "${store}" || "${cur}" == -* ]]; then
        _cuca "$@"
        return
    fi
    local ids suffix=""
    ids="$(cuca complete-sessions "${store}" 2>/dev/null)" || { _cuca "$@"; return; }
    [[ "${words[1]}" == fork ]] && suffix=":"
    local done="" id
    [[ "${cur}" == *:* ]] && done="${cur%:*}:"
    COMPREPLY=()
    while IFS= read -r id; do
        [[ "${id}" == "${cur}"* ]] && COMPREPLY+=("${id#"${done}"}${suffix}")
    done <<< "${ids}"
    [[ -n "${suffix}" ]] && compopt -o nospace 2>/dev/null
    return 0
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _cuca_sessions -o nosort -o bashdefault -o default cuca
else
    complete -F _cuca_sessions -o bashdefault -o default cuca
fi
"#;

/// Fish: the same, through `commandline`.
const FISH_SESSIONS: &str = r#"
function __cuca_store
    set -l words (commandline -opc)
    for word in $words[3..-1]
        if not string match -q -- '-*' $word
            echo $word
            return 0
        end
    end
    return 1
end
complete -c cuca -n '__fish_seen_subcommand_from show replay export repair verify compact diff; and __cuca_store >/dev/null' -f -a '(cuca complete-sessions (__cuca_store) 2>/dev/null)'
"#;
