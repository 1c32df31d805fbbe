//! Session file names: the seed's `{session_id}.cslog` whenever it fits one file name, and an
//! overflow name, `{first bytes of the id}~{sha-256 of the id}.cslog`, when it does not.
//!
//! A fork id doubles in length at every level (`{sid}:fork:{sid}:{seq}:{n}`), so a session
//! forked a few times from a UUID no longer fits the 255-byte file name limit. Such a session
//! gets an overflow name; its true id is the `session_id` every record in the file carries,
//! which is how `sessions` lists it and how an open checks that the file is the id's own.
//!
//! Two ids never share a name: a seed name is the id itself, and an id that happens to look
//! like an overflow stem (`…~` and 64 lowercase hex digits) gets an overflow name too, so a
//! name that looks like an overflow stem is always one. Two overflow names are equal only when
//! the SHA-256 of the two ids are, and an open refuses a file whose records carry another id.

use sha2::{Digest, Sha256};

use crate::backend::{EXTENSION, MAX_FILE_NAME_LEN};
use crate::compact::COMPACTED_EXTENSION;

/// The longest session id the file store takes, in bytes: 1 MiB. Every record carries its
/// session id, so this keeps the longest id far below [`crate::MAX_FRAME_LEN`]; forks nested
/// ten deep from a UUID make ids of about 47 KiB.
pub const MAX_SESSION_ID_LEN: usize = 1024 * 1024;

/// How many bytes of the id an overflow name keeps in front, so a listing still shows where
/// a session came from.
const OVERFLOW_PREFIX_LEN: usize = 64;

/// Hex digits of the SHA-256 in an overflow name.
const HASH_HEX_LEN: usize = 64;

/// The live file name of a session: `{session_id}.cslog`, or its overflow name.
pub(crate) fn live_name(session_id: &str) -> String {
    name(session_id, EXTENSION)
}

/// The compacted file name of a session: `{session_id}.cslog.gz`, or its overflow name.
pub(crate) fn compacted_name(session_id: &str) -> String {
    name(session_id, COMPACTED_EXTENSION)
}

fn name(session_id: &str, extension: &str) -> String {
    let seed = format!("{session_id}.{extension}");
    if seed.len() <= MAX_FILE_NAME_LEN && !is_overflow_stem(session_id) {
        seed
    } else {
        format!("{}.{extension}", overflow_stem(session_id))
    }
}

/// The temporary name a file is written under before it is renamed or linked to `name`: a
/// hidden, fixed-length name derived from `name`, so it fits whatever `name` is.
pub(crate) fn tmp_name(name: &str) -> String {
    let hash = sha256_hex(name);
    format!(".{}.tmp", &hash[..32])
}

/// Whether a file name stem (the name without `.cslog` or `.cslog.gz`) is an overflow name,
/// whose true id is inside the file.
pub(crate) fn is_overflow_stem(stem: &str) -> bool {
    let bytes = stem.as_bytes();
    let Some(tilde_at) = bytes.len().checked_sub(HASH_HEX_LEN + 1) else {
        return false;
    };
    bytes[tilde_at] == b'~'
        && bytes[tilde_at + 1..]
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `{first OVERFLOW_PREFIX_LEN bytes of the id, cut at a character boundary}~{sha-256 hex}`.
fn overflow_stem(session_id: &str) -> String {
    let mut cut = session_id.len().min(OVERFLOW_PREFIX_LEN);
    while !session_id.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}~{}", &session_id[..cut], sha256_hex(session_id))
}

fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(HASH_HEX_LEN);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    /// "Keep the seed's `{session_id}.cslog` naming whenever it fits."
    #[test]
    fn an_id_that_fits_keeps_the_seed_name_in_each_form() {
        assert_eq!(live_name("demo"), "demo.cslog");
        assert_eq!(compacted_name("demo"), "demo.cslog.gz");
        let longest = "x".repeat(MAX_FILE_NAME_LEN - ".cslog".len());
        assert_eq!(live_name(&longest), format!("{longest}.cslog"));
        // Its compacted name would be 258 bytes: that form overflows on its own.
        let packed = compacted_name(&longest);
        assert!(packed.len() <= MAX_FILE_NAME_LEN);
        assert!(packed.starts_with(&"x".repeat(OVERFLOW_PREFIX_LEN)));
        assert!(is_overflow_stem(packed.trim_end_matches(".cslog.gz")));
    }

    /// "For ids that cannot fit, use a documented overflow name … and never let two ids
    /// collide."
    #[test]
    fn overflow_names_fit_and_differ_and_an_id_that_looks_like_one_overflows_too() {
        let a = format!("{}a", "u".repeat(300));
        let b = format!("{}b", "u".repeat(300));
        for id in [&a, &b] {
            let name = live_name(id);
            assert!(name.len() <= MAX_FILE_NAME_LEN, "{name}");
            assert!(is_overflow_stem(name.trim_end_matches(".cslog")), "{name}");
            assert!(tmp_name(&compacted_name(id)).len() <= MAX_FILE_NAME_LEN);
        }
        assert_ne!(live_name(&a), live_name(&b));
        // An id spelled like another id's overflow stem does not take that name.
        let lookalike = live_name(&a).trim_end_matches(".cslog").to_owned();
        assert!(is_overflow_stem(&lookalike));
        assert_ne!(live_name(&lookalike), format!("{lookalike}.cslog"));
        assert_ne!(live_name(&lookalike), live_name(&a));
    }

    #[test]
    fn an_overflow_prefix_is_cut_at_a_character_boundary() {
        let id = "é".repeat(200);
        let name = live_name(&id);
        let stem = name.trim_end_matches(".cslog");
        let (prefix, _) = stem.split_at(stem.len() - HASH_HEX_LEN - 1);
        assert_eq!(prefix, "é".repeat(OVERFLOW_PREFIX_LEN / 2));
    }

    #[test]
    fn short_or_non_hex_stems_are_seed_names() {
        for stem in ["demo", "~", "a~xyz", &format!("a~{}", "A".repeat(64))] {
            assert!(!is_overflow_stem(stem), "{stem}");
        }
    }
}
