//! What a turn repeats of the turn before: the proxy records a system prompt on every request
//! and the previous answer again as the next request's assistant message (seed 000's rules),
//! so a page that showed both would show every answer twice.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use cuca_events::{MessageContentBlock, Role, SessionEvent};

/// Fingerprints of the turn before and of the turn being read. Hashes, not text, so a long
/// session read up to a late page keeps a few numbers, never its prompts.
#[derive(Debug, Default)]
pub(super) struct Echoes {
    prev_prompts: HashSet<u64>,
    prev_answer: Option<u64>,
    prompts: HashSet<u64>,
    answer: AnswerPrint,
}

/// The answer a turn streamed, folded into a hash as it arrives (never held as text, so a
/// turn of hundreds of MiB read on the way to a later page costs nothing).
#[derive(Debug, Default)]
struct AnswerPrint {
    text: DefaultHasher,
    tool_calls: Vec<String>,
    any: bool,
}

/// The text's bytes streamed into the hasher: `write` is streaming, so blocks written one
/// by one hash as their concatenation does.
fn text_hash(pieces: &[&str]) -> DefaultHasher {
    let mut hasher = DefaultHasher::new();
    for piece in pieces {
        hasher.write(piece.as_bytes());
    }
    hasher
}

fn finish(text: &DefaultHasher, tool_calls: &[String]) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.finish().hash(&mut hasher);
    tool_calls.hash(&mut hasher);
    hasher.finish()
}

fn hash_of(text: &str, tool_calls: &[String]) -> u64 {
    finish(&text_hash(&[text]), tool_calls)
}

impl Echoes {
    /// Takes the next record; true when it repeats what the turn before showed.
    pub(super) fn take(&mut self, event: &SessionEvent) -> bool {
        match event {
            SessionEvent::SystemPrompt { text } => {
                let print = hash_of(text, &[]);
                self.prompts.insert(print);
                self.prev_prompts.contains(&print)
            }
            SessionEvent::Message(message) if message.role == Role::Assistant => {
                let ids: Vec<String> = message
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        MessageContentBlock::ToolCall { id, .. } => Some(id.clone()),
                        _ => None,
                    })
                    .collect();
                self.prev_answer == Some(hash_of(&message.text(), &ids))
            }
            SessionEvent::Output { text } => {
                self.answer.text.write(text.as_bytes());
                self.answer.any = true;
                false
            }
            SessionEvent::ToolCall { id, .. } => {
                self.answer.tool_calls.push(id.clone());
                self.answer.any = true;
                false
            }
            _ => false,
        }
    }

    /// The turn being read has ended: it becomes the turn before.
    pub(super) fn close_turn(&mut self) {
        let answer = std::mem::take(&mut self.answer);
        self.prev_answer = answer.any.then(|| finish(&answer.text, &answer.tool_calls));
        self.prev_prompts = std::mem::take(&mut self.prompts);
    }
}
