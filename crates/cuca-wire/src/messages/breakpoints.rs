//! Where a Messages request marked its prompt-cache breakpoints (`cache_control`), which the
//! request's records have no field for and which decide what the answer costs.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::body::TopLevel;

/// The parts of a block or message this reader looks at; every other key is skipped unread.
#[derive(Deserialize)]
struct Marked<'a> {
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// Every `cache_control` the request carried, in body order, each as `{"at": PATH,
/// "cache_control": VALUE}`: `PATH` names the block as a request error would (`system[1]`,
/// `tools[3]`, `messages[4].content[2]`, a tool result's own block
/// `messages[4].content[2].content[0]`; the empty path for a top-level `cache_control`) and
/// `VALUE` is the marker as sent (`{"type":"ephemeral","ttl":"1h"}`). A part that is not of
/// the shape the Messages API gives it is passed over: the request was read already, and
/// this only notes what it marked.
///
/// `messages` is the request's `messages`, already split into its elements. An element that
/// cannot hold a marker (neither `cache_control` nor a `\u` escape, which could spell it, is
/// in its bytes) is passed over without being read: an agent sends its whole conversation
/// with every call, and only its last messages carry a breakpoint.
pub(crate) fn cache_breakpoints(object: &TopLevel<'_>, messages: &[&RawValue]) -> Vec<Value> {
    let mut found = Vec::new();
    if let Some(marker) = object.get("cache_control") {
        note(&mut found, String::new(), marker);
    }
    for key in ["tools", "system"] {
        if let Some(list) = object.get(key) {
            blocks(&mut found, key, list, 0);
        }
    }
    for (index, message) in messages.iter().enumerate() {
        if !may_hold_a_marker(message) {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Marked<'_>>(message.get()) else {
            continue;
        };
        if let Some(content) = message.content {
            blocks(
                &mut found,
                &format!("messages[{index}].content"),
                content,
                0,
            );
        }
    }
    found
}

/// How deep blocks nest in the Messages API: a message's blocks, and a tool result's own
/// blocks inside one of them. Nothing deeper carries a breakpoint.
const MAX_DEPTH: usize = 1;

/// The breakpoints of a list of blocks at `path` (a string content has none), and of the
/// blocks a tool result holds.
fn blocks(found: &mut Vec<Value>, path: &str, list: &RawValue, depth: usize) {
    let Some(list) = array(list) else { return };
    for (index, block) in list.iter().enumerate() {
        let Ok(block) = serde_json::from_str::<Marked<'_>>(block.get()) else {
            continue;
        };
        let at = format!("{path}[{index}]");
        if let Some(marker) = block.cache_control {
            note(found, at.clone(), marker);
        }
        if let (Some(content), true) = (block.content, depth < MAX_DEPTH) {
            blocks(found, &format!("{at}.content"), content, depth + 1);
        }
    }
}

/// Whether `raw`'s bytes could hold a `cache_control` key: written plainly, or with a `\u`
/// escape somewhere (JSON lets a key be spelled with escapes).
fn may_hold_a_marker(raw: &RawValue) -> bool {
    let text = raw.get();
    text.contains("cache_control") || text.contains("\\u")
}

fn array(raw: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

fn note(found: &mut Vec<Value>, at: String, marker: &RawValue) {
    if marker.get() == "null" {
        return;
    }
    // A marker is a small object; one nested past what a value can be built for is kept as
    // the caller's text.
    let value = serde_json::from_str::<Value>(marker.get())
        .unwrap_or_else(|_| Value::String(marker.get().to_owned()));
    found.push(json!({"at": at, "cache_control": value}));
}
