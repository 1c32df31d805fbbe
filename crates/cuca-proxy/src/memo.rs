//! The messages of requests already read, kept by their bytes: an agent sends every message
//! of its conversation again with each call, so at an agent loop's 1,000th turn 1,997 of
//! the 1,999 messages were read, redacted and keyed at the 999th.
//!
//! Each element of a request's message list (Chat's and the Messages format's `messages`)
//! is fingerprinted by its bytes as the caller sent them. The first time, it is read as its
//! format reads it, redacted by the proxy's rules, and kept with its redaction counts and
//! the keys the replay match compares ([`Keys`]). A
//! later request holding the same bytes gets a copy of the kept messages and counts, and
//! the kept keys, without a JSON tree, a regex or an allocation per text.
//!
//! **Exactness.** A format's reading, the proxy's redaction rules and its keys depend on the
//! element's bytes alone, so what is kept is what reading them again would give. The
//! fingerprint is a 128-bit SipHash-1-3 of the bytes, keyed at random when the proxy starts
//! (as the replay index keys messages): no caller can aim at a collision, and an accidental
//! one is far less likely than a disk error.
//!
//! **Memory.** What is kept is bounded by the bytes of the elements it came from: elements
//! (each counted with a fixed overhead for its entry) are kept in a current generation of at
//! most [`GENERATION_BYTES`]; when it is full it
//! becomes the previous one (the one before is dropped), and an element found in the
//! previous generation is moved to the current. The elements of the conversations being
//! replayed or recorded stay; a conversation no longer asked drops out. An element over
//! [`MAX_ELEMENT_BYTES`] is read every time and not kept.
//!
//! **Lent, not copied, where the request is handed back.** A replaying proxy only compares
//! a request and drops it; a recording one records the messages its session does not hold
//! yet and drops the rest. There, a kept element's messages are moved into the request
//! (no allocation per text) and moved back by [`Memo::give_back`] once the call is answered;
//! a request that asks for an element lent to another one meanwhile reads it anew, and an
//! element never given back (its call failed) is read anew by the next request that holds
//! it. Elsewhere (auto and fork, whose requests go on to be replayed or recorded) a kept
//! element's messages are copied.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use cuca_events::{Message, Role};
use cuca_redact::{Counts, Rules};
use cuca_wire::{MessageReader, ReadElement};
use serde_json::value::RawValue;
use smallvec::SmallVec;

use crate::index::{Key, Keys};

/// The most element bytes one generation keeps; two generations are kept at most.
pub(crate) const GENERATION_BYTES: usize = 8 << 20;

/// What an element is counted as beyond its bytes: its table entry, its messages' and
/// blocks' headers and its keys, so that a generation of many tiny elements (`"ok"`) is
/// bounded in memory as one of a few large ones is.
const ENTRY_BYTES: usize = 192;

/// The largest element kept: a larger one (a whole file a tool read back) is read each time.
pub(crate) const MAX_ELEMENT_BYTES: usize = 1 << 20;

/// One element of a message list as read and redacted, and keyed.
#[derive(Debug)]
struct Kept {
    /// The messages the element stands for, redacted; empty while they are lent to a
    /// request (see [`Memo::give_back`]). Held in the entry when there is one (nearly
    /// always): a lookup then touches the table and nothing else.
    messages: SmallVec<[Message; 1]>,
    /// How many messages the element stands for, lent or not.
    n_messages: usize,
    /// How many values redaction replaced in them.
    counts: Counts,
    /// Each message's key as the replay match compares it (a system message's as a system
    /// prompt's text); empty where the proxy never matches (record mode).
    keys: SmallVec<[Key; 1]>,
}

/// The kept elements' table hasher: a fingerprint is already a keyed SipHash of the
/// element, so its low 64 bits are the bucket hash as they are (hashing it again cost a
/// SipHash per element of every request).
#[derive(Default)]
struct AlreadyHashed(u64);

impl Hasher for AlreadyHashed {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u128` fingerprints are hashed here (`write_u128`); any other key's bytes
        // are folded in, so the table still works, only not as fast.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u128(&mut self, fingerprint: u128) {
        self.0 = fingerprint as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Table = HashMap<u128, Kept, BuildHasherDefault<AlreadyHashed>>;

/// The kept elements, by fingerprint. Held inline, not behind a pointer: an agent's request
/// looks up every element of its conversation, and one memory access per element less is
/// most of what a lookup costs.
#[derive(Default)]
struct Generations {
    current: Table,
    current_bytes: usize,
    previous: Table,
}

impl Generations {
    /// The kept element `fingerprint` (of `bytes` bytes), moved to the current generation
    /// if it was in the previous one.
    fn get(&mut self, fingerprint: u128, bytes: usize) -> Option<&mut Kept> {
        if !self.current.contains_key(&fingerprint) {
            let kept = self.previous.remove(&fingerprint)?;
            self.put(fingerprint, bytes, kept);
        }
        self.current.get_mut(&fingerprint)
    }

    fn put(&mut self, fingerprint: u128, bytes: usize, kept: Kept) {
        if let Some(there) = self.current.get_mut(&fingerprint) {
            // The same bytes, counted already.
            *there = kept;
            return;
        }
        if self.current_bytes + bytes > GENERATION_BYTES {
            self.previous = std::mem::take(&mut self.current);
            self.current_bytes = 0;
        }
        self.current_bytes += bytes;
        self.current.insert(fingerprint, kept);
    }
}

/// The proxy's kept elements, the rules they were redacted by and the keys they are keyed
/// with.
pub(crate) struct Memo {
    /// The fingerprint's SipHash key.
    key: (u64, u64),
    rules: Option<Arc<Rules>>,
    pub(crate) keys: Arc<Keys>,
    /// Whether elements are keyed: only a proxy that matches requests against a recording
    /// (replay, auto, fork) needs keys, and keying a large new element costs a regex pass.
    keyed: bool,
    /// Whether kept messages are lent to a request and given back ([`Memo::give_back`])
    /// instead of copied into it.
    lends: bool,
    kept: Mutex<Generations>,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo").finish_non_exhaustive()
    }
}

impl Memo {
    /// A memo whose elements are redacted by `rules` (none: kept as read) and, when
    /// `keyed`, keyed by `keys` (the replay indexes' own). When `lends`, kept messages are
    /// moved into a request, for [`Memo::give_back`] to return (a caller that drops its
    /// requests without giving them back only makes the memo read their elements again).
    pub(crate) fn new(
        rules: Option<Arc<Rules>>,
        keys: Arc<Keys>,
        keyed: bool,
        lends: bool,
    ) -> Memo {
        Memo {
            key: (rand::random(), rand::random()),
            rules,
            keys,
            keyed,
            lends,
            kept: Mutex::default(),
        }
    }

    /// A reader for one request: reads its elements through this memo and notes what it
    /// read, for [`RequestRead`].
    pub(crate) fn reader(&self) -> RequestReader<'_> {
        RequestReader {
            memo: self,
            read: std::cell::RefCell::new(RequestRead::default()),
            held: std::cell::RefCell::new(None),
        }
    }

    /// Returns the messages a request was lent (`messages`, the request's whole list, as it
    /// was read: nothing in the part `read` covers may have changed since) to the elements
    /// they came from, and drops the rest. An element that was dropped from the memo or read
    /// anew meanwhile keeps what it has.
    pub(crate) fn give_back(&self, read: &RequestRead, messages: Vec<Message>) {
        if read.lent.is_empty() || messages.len() < read.n_messages {
            return;
        }
        let unread = messages.len() - read.n_messages;
        let mut messages = messages.into_iter();
        messages.by_ref().take(unread).for_each(drop);
        let mut generations = self.lock();
        for &(fingerprint, n) in &read.lent {
            let lent = messages.by_ref().take(n);
            match fingerprint.and_then(|f| generations.current.get_mut(&f)) {
                Some(kept) if kept.messages.is_empty() && kept.n_messages == n => {
                    kept.messages.extend(lent);
                }
                _ => lent.for_each(drop),
            }
        }
    }

    fn fingerprint(&self, bytes: &[u8]) -> u128 {
        let mut hasher = siphasher::sip128::SipHasher13::new_with_keys(self.key.0, self.key.1);
        hasher.write(bytes);
        siphasher::sip128::Hasher128::finish128(&hasher).as_u128()
    }

    /// `raw` read by `read`, redacted and keyed.
    fn read_anew(&self, raw: &RawValue, read: ReadElement<'_>) -> Result<Kept, String> {
        let mut messages = Vec::new();
        read(raw, &mut messages)?;
        let mut counts = Counts::new();
        if let Some(rules) = &self.rules {
            for message in &mut messages {
                counts.merge(&crate::redaction::redact_message(rules, message));
            }
        }
        let keys = messages
            .iter()
            .filter(|_| self.keyed)
            .map(|message| match message.role {
                Role::System => self.keys.text(&message.text()),
                _ => self.keys.message(message),
            })
            .collect();
        Ok(Kept {
            n_messages: messages.len(),
            messages: messages.into_iter().collect(),
            counts,
            keys,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Generations> {
        // The maps hold no invariant a panic could break halfway.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What one request's reader read through the memo: its messages' keys and what redaction
/// replaced in them. Its messages are the last of the request's (a Messages-format `system`
/// before them is read by the format itself, not through the memo).
#[derive(Debug, Default)]
pub(crate) struct RequestRead {
    n_messages: usize,
    /// Each element read through the memo, in order: how many messages it stands for, and
    /// its fingerprint where they were lent to the request (for [`Memo::give_back`]).
    lent: Vec<(Option<u128>, usize)>,
    /// The messages' keys; empty when the memo does not key.
    keys: Vec<Key>,
    counts: Counts,
}

impl RequestRead {
    /// How many of the request's messages, from its end, were read (and redacted) here.
    pub(crate) fn n_messages(&self) -> usize {
        self.n_messages
    }

    /// What redaction replaced in the messages read here.
    pub(crate) fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The key of each of the request's `n` messages where it was read here (the last
    /// [`RequestRead::n_messages`] of them), `None` for the others. The keys are the ones
    /// `keys` makes when they are the memo's (`same`); else none is known.
    pub(crate) fn keys(&self, keys: &Keys, same: &Keys, n: usize) -> Vec<Option<Key>> {
        let mut out = Vec::with_capacity(n);
        if !std::ptr::eq(keys, same) || self.keys.len() != self.n_messages || self.n_messages > n {
            out.resize(n, None);
            return out;
        }
        out.resize(n - self.keys.len(), None);
        out.extend(self.keys.iter().copied().map(Some));
        out
    }
}

/// One request's [`MessageReader`] over the memo.
pub(crate) struct RequestReader<'m> {
    memo: &'m Memo,
    read: std::cell::RefCell<RequestRead>,
    /// The memo's lock, taken at the request's first element and held while its elements
    /// are looked up (one lock a request, not one an element); let go while an element is
    /// read anew, which may take long for a large one.
    held: std::cell::RefCell<Option<std::sync::MutexGuard<'m, Generations>>>,
}

impl RequestReader<'_> {
    /// What was read, once the request is.
    pub(crate) fn finish(self) -> RequestRead {
        drop(self.held.into_inner());
        self.read.into_inner()
    }

    /// Notes `kept` as read and hands its messages over: moved, when `lent` names the
    /// element they are to be given back to, else copied.
    fn take(&self, kept: &mut Kept, out: &mut Vec<Message>, lent: Option<u128>) {
        let mut noted = self.read.borrow_mut();
        noted.n_messages += kept.n_messages;
        noted.lent.push((lent, kept.n_messages));
        noted.keys.extend_from_slice(&kept.keys);
        if !kept.counts.is_empty() {
            noted.counts.merge(&kept.counts);
        }
        if lent.is_some() {
            out.extend(kept.messages.drain(..));
        } else {
            out.extend(kept.messages.iter().cloned());
        }
    }
}

impl MessageReader for RequestReader<'_> {
    fn read(
        &self,
        raw: &RawValue,
        out: &mut Vec<Message>,
        read: ReadElement<'_>,
    ) -> Result<(), String> {
        let bytes = raw.get().as_bytes();
        if bytes.len() > MAX_ELEMENT_BYTES {
            let mut kept = self.memo.read_anew(raw, read)?;
            self.take(&mut kept, out, None);
            return Ok(());
        }
        let fingerprint = self.memo.fingerprint(bytes);
        let size = bytes.len() + ENTRY_BYTES;
        let mut held = self.held.borrow_mut();
        let generations = held.get_or_insert_with(|| self.memo.lock());
        let lend = self.memo.lends.then_some(fingerprint);
        match generations.get(fingerprint, size) {
            Some(kept) if kept.messages.len() == kept.n_messages => {
                self.take(kept, out, lend);
                return Ok(());
            }
            // Not kept, or lent to another request meanwhile: read anew, and kept (in place
            // of the lent one, whose return then finds this one and is dropped).
            _ => {}
        }
        *held = None;
        let mut kept = self.memo.read_anew(raw, read)?;
        self.take(&mut kept, out, lend);
        self.memo.lock().put(fingerprint, size, kept);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
