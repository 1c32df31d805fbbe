//! `cuca completions SHELL`: the shell's completion script for every command and option,
//! generated from the same definitions clap parses with, so it never falls behind them; for
//! bash, zsh, fish and elvish, followed by the lines that complete session ids from the store
//! typed before them (`cuca complete-sessions STORE`). clap_complete's scripts are static:
//! they cannot ask the store, so those lines are written here. PowerShell gets commands and
//! options only.

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
        clap_complete::Shell::Zsh => script = zsh(&script),
        clap_complete::Shell::Elvish => script.extend_from_slice(ELVISH_SESSIONS.as_bytes()),
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

/// Zsh: clap's script ends by registering `_cuca` (or, autoloaded from `fpath` as `_cuca`,
/// by calling it). Both are pointed at `_cuca_sessions` instead, which answers the commands
/// that take a session and hands everything else to clap's `_cuca`. Autoloaded, the file
/// redefines `_cuca` as clap's function, so it registers `_cuca_sessions` for the completions
/// after the first as well. A script whose ending clap changed gets the lines appended, which
/// registers them too.
fn zsh(script: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(script);
    let head = text.strip_suffix(ZSH_CLAP_ENDING).unwrap_or(&text);
    let mut out = head.as_bytes().to_vec();
    out.extend_from_slice(ZSH_SESSIONS.as_bytes());
    out
}

/// The lines clap_complete ends its zsh script with.
const ZSH_CLAP_ENDING: &str = r#"
if [ "$funcstack[1]" = "_cuca" ]; then
    _cuca "$@"
else
    compdef _cuca cuca
fi
"#;

/// Zsh's session-id completion; zsh does not split words at `:`, so whole ids are offered
/// and zsh matches them against what was typed.
const ZSH_SESSIONS: &str = r#"
_cuca_sessions() {
    local cmd="${words[2]}"
    case "${cmd}" in
        show|replay|export|repair|verify|compact|diff|fork) ;;
        *) _cuca "$@"; return ;;
    esac
    local store="" i
    for (( i = 3; i < CURRENT; i++ )); do
        [[ "${words[i]}" == -* ]] && continue
        store="${words[i]}"
        break
    done
    if [[ -z "${store}" || "${words[CURRENT]}" == -* ]]; then
        _cuca "$@"
        return
    fi
    local listed
    listed="$(cuca complete-sessions "${store}" 2>/dev/null)" || { _cuca "$@"; return; }
    local -a ids
    ids=("${(@f)listed}")
    ids=("${(@)ids:#}")
    if [[ "${cmd}" == fork ]]; then
        compadd -S ':' -- "${ids[@]}"
    else
        compadd -- "${ids[@]}"
    fi
}

if [ "$funcstack[1]" = "_cuca" ]; then
    compdef _cuca_sessions cuca
    _cuca_sessions "$@"
else
    compdef _cuca_sessions cuca
fi
"#;

/// Elvish: clap's arg-completer is kept and wrapped; the commands that take a session, once
/// their store is typed, list the store's ids (elvish matches them against what was typed).
const ELVISH_SESSIONS: &str = r#"
var cuca-static-completer~ = $edit:completion:arg-completer[cuca]
set edit:completion:arg-completer[cuca] = {|@words|
    var n = (count $words)
    var store = ''
    if (and (> $n 3) (has-value [show replay export repair verify compact diff fork] $words[1]) (not (str:has-prefix $words[-1] '-'))) {
        for word $words[2..(- $n 1)] {
            if (and (eq $store '') (not (str:has-prefix $word '-'))) {
                set store = $word
            }
        }
    }
    if (eq $store '') {
        cuca-static-completer $@words
    } else {
        var suffix = ''
        if (eq $words[1] fork) {
            set suffix = ':'
        }
        try {
            var ids = [(cuca complete-sessions $store 2>/dev/null | from-lines)]
            for id $ids {
                edit:complex-candidate $id &code-suffix=$suffix
            }
        } catch {
            # No cuca on PATH or an unreadable store: nothing to offer, and clap's completer
            # has no entry for a command line holding a store.
        }
    }
}
"#;

/// Fish: the same, through `commandline` (a point for `fork`: the session then `:`).
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
complete -c cuca -n '__fish_seen_subcommand_from fork; and __cuca_store >/dev/null' -f -a '(cuca complete-sessions (__cuca_store) 2>/dev/null | string replace -r \'$\' :)'
"#;
