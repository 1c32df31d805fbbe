//! The shell every format's stream decoder is built in: SSE framing, the format's end marker,
//! passing over malformed events and counting them, the bound on upstream indices, the end of
//! the body. A format fills in [`Events`]: what one event means, and what the end of the body
//! means.

use cuca_events::MessageContentBlock;

use crate::error::WireError;
use crate::sse::{SseDecoder, SseEvent};
use crate::summary::StreamSummary;
use crate::text::{clip_server_words, for_clip_error, server_text};

/// The largest index a decoder accepts from an upstream: a choice, a tool call, a content
/// block, an output item, a content or summary part.
///
/// A decoder keeps state per index (a count per part, an open block per index), so an index
/// is memory the upstream chooses: one 170-byte event naming content part 4,000,000 once made
/// a decoder allocate a list that long and clone it on every delta, gigabytes in all. Real
/// streams number their parts from 0 and use a handful (one choice, a few content blocks, an
/// item per tool call, a few dozen in the longest agent turns), so 4,096 is far past any real
/// answer while what a hostile index can cost stays a few hundred kilobytes.
pub const MAX_INDEX: u64 = 4096;

/// `index` when it is within [`MAX_INDEX`]; otherwise why the event carrying it is malformed,
/// naming the field (`"content_index"`), the index and the bound.
pub(crate) fn bounded(field: &str, index: u64) -> Result<u64, String> {
    if index > MAX_INDEX {
        return Err(format!(
            "an event whose {field} {index} is past {MAX_INDEX}, the largest index a decoder accepts"
        ));
    }
    Ok(index)
}

/// What every decoder keeps beside its format's own state.
#[derive(Debug, Default)]
pub(crate) struct Common {
    /// The summary so far, `wire` included.
    pub(crate) summary: StreamSummary,
    /// Pass over an event that is not the format's instead of failing the stream.
    pub(crate) skip_malformed: bool,
    /// The last error's text with the server's bytes unclipped (up to what the call log's
    /// `clip_error` needs).
    pub(crate) detail: Option<String>,
}

impl Common {
    /// An error the server sent in the stream, `text` in its own words: clipped in the error,
    /// kept (to the call log's bound) as the detail.
    pub(crate) fn stream_error(&mut self, text: String) -> WireError {
        let message = clip_server_words(&text);
        self.detail = Some(for_clip_error(text));
        WireError::StreamError { message }
    }

    /// An event that is not what a server of the format sends (`why`: "not a
    /// chat.completion.chunk (…)"): a skipping decoder passes over it, counting it and keeping
    /// the first one's sentence; any other refuses the stream with it.
    pub(crate) fn malformed(&mut self, why: &str, data: &str) -> Result<(), WireError> {
        let what = format!("event {} is {why}", self.summary.n_events);
        if self.skip_malformed {
            self.summary.n_skipped += 1;
            if self.summary.first_skipped.is_none() {
                self.summary.first_skipped = Some(format!("{what}: {}", clip_server_words(data)));
            }
            return Ok(());
        }
        self.detail = Some(for_clip_error(format!("{what}: {data}")));
        Err(WireError::Decode {
            message: format!("{what}: {}", clip_server_words(data)),
        })
    }

    /// The refusal of a stream that ended before the format's end.
    pub(crate) fn truncated(&self) -> WireError {
        WireError::Truncated {
            n_events: self.summary.n_events,
        }
    }
}

/// What a format adds to the shell: its state, the meaning of one event, and the meaning of
/// the body's end.
pub(crate) trait Events: Default + std::fmt::Debug + Send {
    /// Whether an `error` event whose data is a JSON object is read as the format's own event
    /// (Responses names its error events `error` and gives them a `type`); otherwise every
    /// `error` event fails the stream with its data as the server's words.
    const READS_ERROR_EVENTS: bool = false;

    /// The shared part of the state.
    fn common(&self) -> &Common;

    /// The shared part of the state, to change.
    fn common_mut(&mut self) -> &mut Common;

    /// One event with data (trimmed, not empty, already counted), before the end marker.
    fn on_data(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError>;

    /// The body ended; `tail` is what decoding its last bytes gave. Pushes what the format
    /// still holds and refuses a stream that ended before the format's end (with
    /// [`Common::truncated`]).
    fn end(
        &mut self,
        tail: Result<(), WireError>,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError>;
}

/// A format's stream decoder: the SSE layer and the format's [`Events`].
#[derive(Debug, Default)]
pub(crate) struct Shell<E> {
    sse: SseDecoder,
    events: E,
}

impl<E: Events> Shell<E> {
    /// A decoder at the start of a stream; `skip_malformed` as [`Common::skip_malformed`].
    pub(crate) fn new(skip_malformed: bool) -> Self {
        let mut shell = Shell::<E>::default();
        shell.events.common_mut().skip_malformed = skip_malformed;
        shell
    }

    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        if self.is_done() {
            return Ok(());
        }
        let events = &mut self.events;
        match self
            .sse
            .feed(bytes, &mut |event| on_event(events, event, out))
        {
            // Bytes after the end marker are ignored also when they arrive in the same read
            // as it: the SSE layer decodes the whole read before the decoder can stop it, so
            // an error met once the end was seen came from those bytes. (Found by fuzzing:
            // the same stream was accepted or refused depending on where the network split
            // it.)
            Err(_) if self.is_done() => Ok(()),
            other => other,
        }
    }

    pub(crate) fn finish(
        &mut self,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<StreamSummary, WireError> {
        let tail = if self.is_done() {
            Ok(())
        } else {
            let events = &mut self.events;
            self.sse.finish(&mut |event| on_event(events, event, out))
        };
        self.events.end(tail, out)?;
        Ok(self.summary().clone())
    }

    pub(crate) fn summary(&self) -> &StreamSummary {
        &self.events.common().summary
    }

    pub(crate) fn is_done(&self) -> bool {
        self.summary().saw_done
    }

    pub(crate) fn error_detail(&self) -> Option<&str> {
        self.events.common().detail.as_deref()
    }
}

/// One dispatched event: nothing after the end marker; an `error` event fails the stream; an
/// event without data is a keep-alive; every other is counted and handed to the format.
fn on_event<E: Events>(
    events: &mut E,
    event: SseEvent<'_>,
    out: &mut Vec<MessageContentBlock>,
) -> Result<(), WireError> {
    let common = events.common_mut();
    if common.summary.saw_done {
        return Ok(());
    }
    let data = event.data.trim();
    if event.event == "error" && !(E::READS_ERROR_EVENTS && data.starts_with('{')) {
        return Err(common.stream_error(server_text(data)));
    }
    if data.is_empty() {
        return Ok(());
    }
    common.summary.n_events += 1;
    events.on_data(event.event, data, out)
}

/// The public face of a [`Shell`]: a named decoder type with the documented methods and the
/// [`crate::StreamDecoder`] impl, each a call into the shell.
macro_rules! stream_decoder {
    ($(#[$doc:meta])* $name:ident, $events:ty) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        pub struct $name($crate::stream::Shell<$events>);

        impl $name {
            /// A decoder at the start of a stream.
            pub fn new() -> Self {
                $name($crate::stream::Shell::new(false))
            }

            /// A decoder that passes over an event that does not parse (or that the format's
            /// servers never send, such as an index past [`crate::MAX_INDEX`]), counting it in
            /// [`crate::StreamSummary::n_skipped`], instead of refusing the rest of the stream:
            /// for a recorder that forwards every byte whatever it holds and must record all
            /// it can (the proxy). An error the server sends in the stream still fails it.
            pub fn skipping_malformed() -> Self {
                $name($crate::stream::Shell::new(true))
            }

            /// Feeds the next bytes; the blocks they complete are pushed onto `out` in order.
            /// Bytes after the format's end marker are ignored.
            pub fn feed(
                &mut self,
                bytes: &[u8],
                out: &mut Vec<cuca_events::MessageContentBlock>,
            ) -> Result<(), $crate::WireError> {
                self.0.feed(bytes, out)
            }

            /// Ends the stream (the body ended), pushing what is still being assembled. A
            /// stream that ended before the format's end is refused with
            /// [`crate::WireError::Truncated`]; the blocks still held are pushed all the same.
            pub fn finish(
                &mut self,
                out: &mut Vec<cuca_events::MessageContentBlock>,
            ) -> Result<$crate::StreamSummary, $crate::WireError> {
                self.0.finish(out)
            }

            /// The summary so far, its `wire` included.
            pub fn summary(&self) -> &$crate::StreamSummary {
                self.0.summary()
            }

            /// Whether the format's end marker has arrived: the caller may stop reading.
            pub fn is_done(&self) -> bool {
                self.0.is_done()
            }

            /// The last error's text with the server's own bytes in it unclipped (up to what
            /// the call log's `clip_error` needs), when the error quoted them: the in-stream
            /// error's message, the event that did not parse, a nameless tool call's
            /// arguments. `None` for errors made of the decoder's own words alone.
            pub fn error_detail(&self) -> Option<&str> {
                self.0.error_detail()
            }
        }

        impl $crate::StreamDecoder for $name {
            fn feed(
                &mut self,
                bytes: &[u8],
                out: &mut Vec<cuca_events::MessageContentBlock>,
            ) -> Result<(), $crate::WireError> {
                self.0.feed(bytes, out)
            }

            fn finish(
                &mut self,
                out: &mut Vec<cuca_events::MessageContentBlock>,
            ) -> Result<$crate::StreamSummary, $crate::WireError> {
                self.0.finish(out)
            }

            fn summary(&self) -> &$crate::StreamSummary {
                self.0.summary()
            }

            fn is_done(&self) -> bool {
                self.0.is_done()
            }

            fn error_detail(&self) -> Option<&str> {
                self.0.error_detail()
            }
        }
    };
}

pub(crate) use stream_decoder;

#[cfg(test)]
mod tests;
