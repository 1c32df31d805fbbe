//! Where the journal's bytes are written: on the dedicated writer thread, never inline.
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use cuca_journal::{Recorder, RecorderConfig, SinkHook};

/// Every write's thread: its id and its name.
type Writers = Arc<Mutex<Vec<(ThreadId, Option<String>)>>>;

/// A sink that notes which thread every write comes from.
struct ThreadNoting {
    file: File,
    writers: Writers,
}

impl Write for ThreadNoting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let current = std::thread::current();
        self.writers
            .lock()
            .unwrap()
            .push((current.id(), current.name().map(str::to_owned)));
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[test]
fn lines_are_written_on_a_dedicated_os_thread_rather_than_inline() {
    // "Lines are written on a dedicated OS thread rather than inline. gg runs every agent on
    // one current_thread runtime, where a synchronous file write stalls every agent".
    let dir = tempfile::tempdir().unwrap();
    let writers: Writers = Arc::new(Mutex::new(Vec::new()));
    let noted = Arc::clone(&writers);
    let hook: SinkHook = Arc::new(move |file| {
        Box::new(ThreadNoting {
            file,
            writers: Arc::clone(&noted),
        })
    });
    let config = RecorderConfig::new(dir.path(), "thread")
        .unwrap()
        .with_sink_hook(hook);
    let recorder = Recorder::start(config).unwrap();
    for n in 0..50 {
        recorder.clock("root", Duration::from_millis(n), None);
    }
    let status = recorder.finish();
    assert_eq!((status.entries, status.stopped), (50, None));

    let me = std::thread::current().id();
    let writers = writers.lock().unwrap();
    assert!(!writers.is_empty(), "the journal was written");
    for (id, name) in writers.iter() {
        assert_ne!(*id, me, "a write happened inline on the recording thread");
        assert_eq!(name.as_deref(), Some("cuca-journal-writer"));
    }
    let text = std::fs::read_to_string(recorder.path()).unwrap();
    assert_eq!(text.lines().count(), 52, "header, 50 entries, end");
}
