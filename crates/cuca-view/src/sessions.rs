//! What the session pages show, read through `FileBackend` and the `SessionBackend` trait.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuca_events::{PluginError, ReadAfter, ReadMark, ReplayedRecord, SessionBackend, SessionEvent};
use cuca_store_file::{FileBackend, Verdict};

use crate::error::ViewError;
use crate::ViewConfig;

pub(crate) mod clip;
mod echo;

pub use clip::{Clipped, MAX_LABEL_BYTES, MAX_TAIL_RECORDS, MAX_TURN_RECORDS, MAX_TURN_TEXT_BYTES};

/// How many turns one session page shows. Small enough that the first page of a session of
/// any length is read in a few milliseconds; the page links to the next.
pub const TURNS_PER_PAGE: usize = 20;

/// How many records one live poll returns at most, so a poll after a long pause stays small;
/// the page asks again straight away when it got a full batch.
pub const MAX_LIVE_BATCH: usize = 500;

/// The bytes of recorded text one live poll answers with, at most (plus one record's
/// [`MAX_LIVE_RECORD_BYTES`], the record that crossed it): a record may be 32 MiB, and 500 of
/// them answered whole were a 325 MB answer that took the viewer to 1.34 GB. 1 MiB is a
/// page's worth of new text; the page asks again straight away for the rest.
pub const MAX_LIVE_BYTES: usize = 1024 * 1024;

/// The bytes of text one record keeps in a live answer, as a session page keeps of a turn
/// ([`MAX_TURN_TEXT_BYTES`]); the rest is counted and the page says how much was cut.
pub const MAX_LIVE_RECORD_BYTES: usize = MAX_TURN_TEXT_BYTES;

/// One row of the sessions list.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// The directory it lives in; for a store that is not a directory, the store's name
    /// ([`ViewConfig::with_store`]).
    pub dir: PathBuf,
    /// Records a load returns (none when the file is refused).
    pub n_records: u64,
    /// Turns: completed Latency + TokenUsage pairs, plus an unfinished last one.
    pub n_turns: u64,
    /// Prompt tokens over every turn.
    pub prompt_tokens: u64,
    /// Completion tokens over every turn.
    pub completion_tokens: u64,
    /// The newest record's timestamp, milliseconds since the Unix epoch.
    pub last_activity_ms: Option<u64>,
    /// The oldest record's timestamp: with the newest, how long the session ran.
    pub first_activity_ms: Option<u64>,
    /// Turns with an error (an incomplete call, a failed tool result).
    pub n_errors: u64,
    /// The models its calls named, sorted (at most [`MAX_LIST_MODELS`]).
    pub models: Vec<String>,
    /// What `cuca verify` says about the file.
    pub status: Status,
    /// The session this one was forked from, and the point, when its id says so.
    pub parent: Option<(String, String)>,
}

/// Most models a list row names: a session switches models a few times at most, and a row
/// stays one line.
pub const MAX_LIST_MODELS: usize = 4;

/// A session file's verify status, as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Every byte is a header or a good frame.
    Clean,
    /// Damage was found where nothing recorded was lost.
    Recovered,
    /// A load refuses: the offset and reason.
    Refused {
        /// Where the damage starts.
        offset: u64,
        /// What was found.
        reason: String,
    },
    /// The file could not be read at all.
    Unreadable {
        /// Why.
        reason: String,
    },
}

impl Status {
    /// What the list says of the file, in words that say it is about the file's bytes (a
    /// session whose calls failed can still be an intact file).
    pub fn file_words(&self) -> &'static str {
        match self {
            Status::Clean => "file intact",
            Status::Recovered => "file recovered",
            Status::Refused { .. } => "file refused",
            Status::Unreadable { .. } => "file unreadable",
        }
    }

    /// The word the list shows.
    pub fn word(&self) -> &'static str {
        match self {
            Status::Clean => "clean",
            Status::Recovered => "recovered",
            Status::Refused { .. } => "refused",
            Status::Unreadable { .. } => "unreadable",
        }
    }
}

/// Splits a fork id `{parent}:fork:{parent}:{sequence}:{n}` into its parent session and the
/// point it was cut at. Ids that do not have that exact shape have no parent.
///
/// ```
/// use cuca_view::sessions::parent_of;
/// assert_eq!(
///     parent_of("demo:fork:demo:1:0"),
///     Some(("demo".to_owned(), "demo:1".to_owned()))
/// );
/// assert_eq!(parent_of("demo"), None);
/// assert_eq!(parent_of("a:fork:b:1:0"), None);
/// ```
pub fn parent_of(id: &str) -> Option<(String, String)> {
    cuca_events::fork_parent(id).map(|(parent, point)| (parent.to_owned(), point.to_owned()))
}

/// The newest list scan: the directories it covered, when it started, and its rows.
#[derive(Debug)]
struct Recent {
    dirs: Vec<PathBuf>,
    started: std::time::Instant,
    rows: Vec<SessionSummary>,
}

/// Held while a list scans its sessions, and holding the newest scan (see [`list`]).
static LISTING: std::sync::Mutex<Option<Recent>> = std::sync::Mutex::new(None);

/// Every session in the configured directories, most recent activity first.
///
/// Each file is verified in full (the status column), so this costs one read of every
/// session, streamed: memory is one frame at a time, never a whole session; a session
/// whose file cannot be read is a row with [`Status::Unreadable`], never a failed list.
///
/// One scan at a time in the process, shared: a list that arrives while another scans
/// waits for it, and takes the rows of a scan that started after it arrived (so it never
/// sees a state older than its own request) instead of scanning again. A burst of
/// concurrent lists therefore costs at most two scans, one after the other, and holds one
/// frame at a time, not a frame (or, before, a whole session) per request.
pub fn list(config: &ViewConfig) -> Result<Vec<SessionSummary>, ViewError> {
    let arrived = std::time::Instant::now();
    // A scan that panicked left its rows unwritten, nothing half-made.
    let mut recent = LISTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(recent) = recent.as_ref() {
        if recent.started >= arrived && recent.dirs == listed(config) {
            return Ok(recent.rows.clone());
        }
    }
    let started = std::time::Instant::now();
    let rows = scan_all(config)?;
    *recent = Some(Recent {
        dirs: listed(config),
        started,
        rows: rows.clone(),
    });
    Ok(rows)
}

/// What a list scanned: the directories and the other stores' names, in order.
fn listed(config: &ViewConfig) -> Vec<PathBuf> {
    let names = config
        .session_stores
        .iter()
        .map(|(name, _)| PathBuf::from(name));
    config.session_dirs.iter().cloned().chain(names).collect()
}

fn scan_all(config: &ViewConfig) -> Result<Vec<SessionSummary>, ViewError> {
    let mut rows = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for dir in &config.session_dirs {
        let backend = FileBackend::new(dir.clone())?;
        for id in backend.sessions()? {
            if seen.insert(id.clone()) {
                rows.push(summarise(&backend, dir, id));
            }
        }
    }
    for (name, backend) in &config.session_stores {
        for id in backend.sessions()? {
            if seen.insert(id.clone()) {
                rows.push(summarise_stored(&**backend, Path::new(name), id));
            }
        }
    }
    rows.sort_by(|a, b| {
        b.last_activity_ms
            .cmp(&a.last_activity_ms)
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(rows)
}

fn summarise(backend: &FileBackend, dir: &Path, id: String) -> SessionSummary {
    let mut row = SessionSummary {
        parent: parent_of(&id),
        id,
        dir: dir.to_owned(),
        n_records: 0,
        n_turns: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        last_activity_ms: None,
        first_activity_ms: None,
        n_errors: 0,
        models: Vec::new(),
        status: Status::Clean,
    };
    // A streaming scan: each record is skimmed (its text left in the read buffer) and only
    // its numbers kept, so a row costs one frame of memory however long the session, and
    // concurrent lists cost one frame each, never a whole session each.
    let mut tally = Tally::default();
    let summary = match backend.skim_each(&row.id, &mut |record| {
        let event = record.hollow_event();
        if matches!(
            event,
            SessionEvent::CallRequest { .. } | SessionEvent::CallFinish { .. }
        ) {
            record.each_text(|field, _, text| {
                if field == "model" {
                    tally.model(text);
                }
            });
        }
        tally.take(record.timestamp_ms, &event);
        Ok(())
    }) {
        Ok(summary) => summary,
        Err(error) => {
            row.status = Status::Unreadable {
                reason: error.to_string(),
            };
            return row;
        }
    };
    row.status = match &summary.verdict {
        Verdict::Clean => Status::Clean,
        Verdict::Recovered => Status::Recovered,
        Verdict::Refused { offset, reason } => Status::Refused {
            offset: *offset,
            reason: reason.clone(),
        },
        _ => Status::Unreadable {
            reason: format!("{:?}", summary.verdict),
        },
    };
    // Records are visited before the verdict is known; a refused file's row counts none, as
    // a load of it returns none.
    if !summary.is_loadable() {
        return row;
    }
    row.n_records = tally.n_records;
    row.last_activity_ms = tally.last_activity_ms;
    row.prompt_tokens = tally.prompt_tokens;
    row.completion_tokens = tally.completion_tokens;
    tally.fill(&mut row);
    row
}

/// [`summarise`] for a store that is not a directory: the session loads whole (clean) or
/// the store refuses it (unreadable, with the store's reason).
fn summarise_stored(backend: &dyn SessionBackend, name: &Path, id: String) -> SessionSummary {
    let mut tally = Tally::default();
    let read = backend.replay_each(&id, &mut |record| {
        if let SessionEvent::CallRequest { model, .. } | SessionEvent::CallFinish { model, .. } =
            &record.event
        {
            tally.model(model);
        }
        tally.take(record.timestamp_ms, &record.event);
        Ok(())
    });
    let mut row = SessionSummary {
        parent: parent_of(&id),
        id,
        dir: name.to_owned(),
        n_records: 0,
        n_turns: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        last_activity_ms: None,
        first_activity_ms: None,
        n_errors: 0,
        models: Vec::new(),
        status: Status::Clean,
    };
    if let Err(error) = read {
        row.status = Status::Unreadable {
            reason: error.to_string(),
        };
        return row;
    }
    row.n_records = tally.n_records;
    row.last_activity_ms = tally.last_activity_ms;
    row.prompt_tokens = tally.prompt_tokens;
    row.completion_tokens = tally.completion_tokens;
    tally.fill(&mut row);
    row
}

/// Every session id of every configured store, directories first.
fn all_ids(config: &ViewConfig) -> Result<Vec<String>, ViewError> {
    let mut ids = Vec::new();
    for dir in &config.session_dirs {
        ids.extend(FileBackend::new(dir.clone())?.sessions()?);
    }
    for (_, backend) in &config.session_stores {
        ids.extend(backend.sessions()?);
    }
    Ok(ids)
}

/// What a list row counts, record by record.
#[derive(Debug, Default)]
struct Tally {
    n_records: u64,
    last_activity_ms: Option<u64>,
    first_activity_ms: Option<u64>,
    prompt_tokens: u64,
    completion_tokens: u64,
    segmenter: Segmenter,
    /// Turns closed with an error, and whether the open turn has one.
    n_errors: u64,
    open_error: bool,
    models: std::collections::BTreeSet<String>,
}

impl Tally {
    /// Notes a model a call named.
    fn model(&mut self, model: &str) {
        if !model.is_empty() && self.models.len() < MAX_LIST_MODELS && !self.models.contains(model)
        {
            let mut name = model.to_owned();
            clip::clip_label(&mut name);
            self.models.insert(name);
        }
    }

    /// Writes what was counted beyond the record and token totals into `row`.
    fn fill(self, row: &mut SessionSummary) {
        row.first_activity_ms = self.first_activity_ms;
        row.n_turns = self.segmenter.turns();
        row.n_errors = self.n_errors + u64::from(self.open_error && self.segmenter.open_content);
        row.models = self.models.into_iter().collect();
    }

    fn take(&mut self, timestamp_ms: u64, event: &SessionEvent) {
        self.n_records += 1;
        self.last_activity_ms = Some(
            self.last_activity_ms
                .map_or(timestamp_ms, |t| t.max(timestamp_ms)),
        );
        self.first_activity_ms = Some(
            self.first_activity_ms
                .map_or(timestamp_ms, |t| t.min(timestamp_ms)),
        );
        self.open_error |= crate::index::error_of(event).is_some();
        if let SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } = event
        {
            self.prompt_tokens += prompt_tokens;
            self.completion_tokens += completion_tokens;
        }
        if self.segmenter.push(event) {
            self.n_errors += u64::from(std::mem::take(&mut self.open_error));
        }
    }
}

/// Seed 001's segmentation, counted: a turn ends at a Latency immediately followed by a
/// TokenUsage; records after the last pair form a final, unfinished turn, unless they are
/// notes only (a fork audit, a model swap), which are no call and are never counted as a turn.
#[derive(Debug, Default)]
struct Segmenter {
    completed: u64,
    open_records: u64,
    open_content: bool,
    last_was_latency: bool,
}

impl Segmenter {
    /// Takes the next record's event; returns true when it closed a turn.
    fn push(&mut self, event: &SessionEvent) -> bool {
        let closes = self.last_was_latency && matches!(event, SessionEvent::TokenUsage { .. });
        self.last_was_latency = matches!(event, SessionEvent::Latency { .. });
        if closes {
            self.completed += 1;
            self.open_records = 0;
            self.open_content = false;
        } else {
            self.open_records += 1;
            self.open_content |= !crate::index::is_note(event);
        }
        closes
    }

    fn turns(&self) -> u64 {
        self.completed + u64::from(self.open_content)
    }
}

/// The store holding a session ([`locate`]): a directory's `FileBackend`, or one of the
/// configured stores; it is a `SessionBackend` itself, so the pages read any of them alike.
#[derive(Debug, Clone)]
pub struct Located(Arc<dyn SessionBackend>, Place);

/// Where a located session's store is: a directory (whose `FileBackend` knows the file's
/// length, which tells a cached index it is stale) or a named store.
#[derive(Debug, Clone)]
enum Place {
    Dir(Arc<FileBackend>),
    Store(String),
}

impl Located {
    /// The store's place for people: the directory's path or the store's name (what `cuca
    /// fork STORE POINT` takes).
    pub fn place(&self) -> String {
        match &self.1 {
            Place::Dir(backend) => backend.dir().display().to_string(),
            Place::Store(name) => name.clone(),
        }
    }

    /// The store's place as a command run from anywhere takes it: a directory given
    /// relative to the viewer's working directory made absolute (a copied `cuca fork DIR
    /// POINT` is pasted in another shell, in another directory).
    pub fn absolute_place(&self) -> String {
        match &self.1 {
            Place::Dir(backend) => {
                let dir = backend.dir();
                std::fs::canonicalize(dir)
                    .or_else(|_| std::path::absolute(dir))
                    .map_or_else(|_| dir.display().to_string(), |p| p.display().to_string())
            }
            Place::Store(name) => name.clone(),
        }
    }

    /// The directory's backend, when the session is in a directory.
    pub fn file(&self) -> Option<&FileBackend> {
        match &self.1 {
            Place::Dir(backend) => Some(backend),
            Place::Store(_) => None,
        }
    }
}

impl SessionBackend for Located {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn append(&self, record: cuca_events::SessionRecord) -> Result<(), PluginError> {
        self.0.append(record)
    }

    fn check_writable(&self, session_id: &str) -> Result<(), PluginError> {
        self.0.check_writable(session_id)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<cuca_events::SessionRecord>, PluginError> {
        self.0.replay(session_id)
    }

    fn replay_each(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
    ) -> Result<(), PluginError> {
        self.0.replay_each(session_id, visit)
    }

    // Forwarded, so a directory's session is read from a mark's byte offset (the trait's
    // default would count from the start).
    fn replay_after(
        &self,
        session_id: &str,
        after: &ReadMark,
        visit: &mut dyn FnMut(ReplayedRecord<'_>, &ReadMark) -> Result<(), PluginError>,
    ) -> Result<ReadAfter, PluginError> {
        self.0.replay_after(session_id, after, visit)
    }

    // Forwarded, so a reader keeping an index of a directory's session skips its reads
    // while the file is unchanged (the trait's default gives no stamp).
    fn stamp(&self, session_id: &str) -> Option<cuca_events::SessionStamp> {
        self.0.stamp(session_id)
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.0.fork(session_id, point_id)
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.0.sessions()
    }

    fn gauge(&self) -> cuca_events::BackendGauge {
        self.0.gauge()
    }
}

/// The store that holds `session`, searched in the configured order (directories first).
pub fn locate(config: &ViewConfig, session: &str) -> Result<Located, ViewError> {
    for dir in &config.session_dirs {
        let backend = FileBackend::new(dir.clone())?;
        if backend.sessions()?.iter().any(|id| id == session) {
            let backend = Arc::new(backend);
            return Ok(Located(
                Arc::clone(&backend) as Arc<dyn SessionBackend>,
                Place::Dir(backend),
            ));
        }
    }
    for (name, backend) in &config.session_stores {
        if backend
            .sessions()?
            .binary_search_by(|id| id.as_str().cmp(session))
            .is_ok()
        {
            return Ok(Located(Arc::clone(backend), Place::Store(name.clone())));
        }
    }
    Err(ViewError::UnknownSession {
        session: session.to_owned(),
    })
}

/// One session in a fork tree: its id, the point it was cut at (for a branch), its branches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkNode {
    /// The session id.
    pub id: String,
    /// The parent's point this branch was cut at; `None` for the tree's root.
    pub point: Option<String>,
    /// Its own branches, by id.
    pub children: Vec<ForkNode>,
}

/// Most sessions a tree shows, so a directory of thousands of forks stays one page.
pub const MAX_TREE_NODES: usize = 500;

/// The whole fork tree `session` belongs to, from its oldest ancestor down, built from the
/// ids in the configured directories (a fork id names its parent and point).
pub fn fork_tree(config: &ViewConfig, session: &str) -> Result<ForkNode, ViewError> {
    let mut ids = all_ids(config)?;
    ids.sort();
    ids.dedup();
    let mut root = session.to_owned();
    while let Some((parent, _)) = parent_of(&root) {
        root = parent;
    }
    let mut children: std::collections::BTreeMap<String, Vec<(String, String)>> =
        std::collections::BTreeMap::new();
    for id in &ids {
        if let Some((parent, point)) = parent_of(id) {
            children
                .entry(parent)
                .or_default()
                .push((id.clone(), point));
        }
    }
    let mut budget = MAX_TREE_NODES;
    Ok(build(&root, None, &children, &mut budget))
}

fn build(
    id: &str,
    point: Option<String>,
    children: &std::collections::BTreeMap<String, Vec<(String, String)>>,
    budget: &mut usize,
) -> ForkNode {
    *budget = budget.saturating_sub(1);
    let mut node = ForkNode {
        id: id.to_owned(),
        point,
        children: Vec::new(),
    };
    for (child, point) in children.get(id).map(Vec::as_slice).unwrap_or_default() {
        if *budget == 0 {
            break;
        }
        node.children
            .push(build(child, Some(point.clone()), children, budget));
    }
    node
}

/// Ids of the sessions forked from `session`, found by their ids.
pub fn children(config: &ViewConfig, session: &str) -> Result<Vec<(String, String)>, ViewError> {
    let mut out = Vec::new();
    for id in all_ids(config)? {
        if let Some((parent, point)) = parent_of(&id) {
            if parent == session {
                out.push((id, point));
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// One record as a page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordView {
    /// Its sequence number.
    pub sequence: u64,
    /// When it was recorded, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// What it holds.
    pub event: SessionEvent,
}

impl From<ReplayedRecord<'_>> for RecordView {
    fn from(record: ReplayedRecord<'_>) -> Self {
        RecordView {
            sequence: record.sequence,
            timestamp_ms: record.timestamp_ms,
            event: record.event,
        }
    }
}

/// One turn, its records in order.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnView {
    /// The turn's 0-based index in the session.
    pub turn_idx: usize,
    /// Its records, in sequence order.
    pub records: Vec<RecordView>,
    /// Whether a Latency + TokenUsage pair closed it.
    pub complete: bool,
    /// What the page left out of it ([`MAX_TURN_TEXT_BYTES`], [`MAX_TURN_RECORDS`]).
    pub clipped: Clipped,
    /// Sequences of its records that repeat what the turn before already showed: a system
    /// prompt sent again, the previous answer echoed back as this request's assistant
    /// message. A page folds them away so each message reads once.
    pub echoes: Vec<u64>,
}

impl TurnView {
    /// Whether this is a final block of notes only (a fork audit, a model swap after the last
    /// call): shown after the turns, never counted as one.
    pub fn is_notes(&self) -> bool {
        !self.complete && self.records.iter().all(|r| crate::index::is_note(&r.event))
    }
}

/// A window of a session's turns.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The session.
    pub session: String,
    /// The turns shown, `first_turn..first_turn + turns.len()`.
    pub turns: Vec<TurnView>,
    /// Whether the session has records after the last turn shown.
    pub more: bool,
    /// Records the backend handed over to build this page (at most one past the page):
    /// what shows that a page never reads the whole of a long session.
    pub records_read: u64,
    /// The read mark after the session's last record, when the page read to the end (it is
    /// the last page): where the page's live poll reads on from.
    pub end: Option<ReadMark>,
}

impl Page {
    /// The newest sequence on the page, where live updates continue from when it is the
    /// session's last page.
    pub fn last_sequence(&self) -> Option<u64> {
        self.turns
            .last()
            .and_then(|turn| turn.records.last())
            .map(|record| record.sequence)
    }
}

/// Reads turns `first_turn..first_turn + n_turns` of `session`, stopping as soon as it has
/// them (and one record more, to know whether there is a next page).
///
/// Each turn is kept clipped ([`MAX_TURN_TEXT_BYTES`] of text, [`MAX_TURN_RECORDS`] records;
/// [`TurnView::clipped`] says what was cut) as its records are read, so a page's memory is its
/// turns' budgets plus the one record being decoded (at most a frame,
/// `cuca_store_file::MAX_FRAME_LEN`), however long a turn is.
pub fn page(
    backend: &dyn SessionBackend,
    session: &str,
    first_turn: usize,
    n_turns: usize,
) -> Result<Page, ViewError> {
    page_from(backend, session, first_turn, n_turns, None)
}

/// [`page`], read from `from`: the index of a turn at or before `first_turn` and the read
/// mark before that turn's first record (what the session's index keeps for every page), so
/// a deep page reads its own turns, not the session up to them. A mark the store no longer
/// recognises (the file was replaced) is dropped and the session read from its start.
pub fn page_from(
    backend: &dyn SessionBackend,
    session: &str,
    first_turn: usize,
    n_turns: usize,
    from: Option<(usize, ReadMark)>,
) -> Result<Page, ViewError> {
    if let Some(from) = from.filter(|(turn_idx, _)| *turn_idx <= first_turn) {
        if let Some(page) = read_page(backend, session, first_turn, n_turns, from)? {
            return Ok(page);
        }
    }
    let page = read_page(backend, session, first_turn, n_turns, (0, ReadMark::START))?;
    // A read from the start is never stale.
    Ok(page.unwrap_or_else(|| Page {
        session: session.to_owned(),
        turns: Vec::new(),
        more: false,
        records_read: 0,
        end: None,
    }))
}

/// One read of a page from `(turn_idx, mark)`; `None` when the mark is stale.
fn read_page(
    backend: &dyn SessionBackend,
    session: &str,
    first_turn: usize,
    n_turns: usize,
    (start_turn, from): (usize, ReadMark),
) -> Result<Option<Page>, ViewError> {
    let mut page = Page {
        session: session.to_owned(),
        turns: Vec::new(),
        more: false,
        records_read: 0,
        end: None,
    };
    let end_turn = first_turn.saturating_add(n_turns);
    let mut turn_idx = start_turn;
    let mut current: Vec<RecordView> = Vec::new();
    let mut segmenter = Segmenter::default();
    let mut stopped = false;
    let mut budget = MAX_TURN_TEXT_BYTES;
    let mut clipped = Clipped::default();
    let mut echo = echo::Echoes::default();
    let mut echoes = Vec::new();
    let result = backend.replay_after(session, &from, &mut |record, _| {
        page.records_read += 1;
        if turn_idx >= end_turn {
            // One record past the page: there is more, and nothing else is needed.
            page.more = true;
            stopped = true;
            return Err(stop());
        }
        let closes = segmenter.push(&record.event);
        let repeats = echo.take(&record.event);
        if turn_idx >= first_turn {
            if repeats {
                echoes.push(record.sequence);
            }
            if clip::keeps(current.len(), &record.event) {
                let mut view = RecordView::from(record);
                clipped.bytes += clip::clip_event(&mut view.event, &mut budget);
                current.push(view);
            } else {
                clipped.records += 1;
            }
        }
        if closes {
            if turn_idx >= first_turn {
                page.turns.push(TurnView {
                    turn_idx,
                    records: std::mem::take(&mut current),
                    complete: true,
                    clipped: std::mem::take(&mut clipped),
                    echoes: std::mem::take(&mut echoes),
                });
            }
            echo.close_turn();
            budget = MAX_TURN_TEXT_BYTES;
            turn_idx += 1;
        }
        Ok(())
    });
    match result {
        Err(_) if stopped => {}
        Err(error) => return Err(error.into()),
        Ok(ReadAfter::Read(mark)) => page.end = Some(mark),
        Ok(_) => return Ok(None),
    }
    if !current.is_empty() {
        page.turns.push(TurnView {
            turn_idx,
            records: current,
            complete: false,
            clipped,
            echoes,
        });
    }
    Ok(Some(page))
}

/// The 0-based turn that holds `sequence`, or `None` when no record has it.
pub fn turn_of(
    backend: &dyn SessionBackend,
    session: &str,
    sequence: u64,
) -> Result<Option<usize>, ViewError> {
    let mut segmenter = Segmenter::default();
    let mut turn_idx = 0usize;
    let mut found = None;
    let result = backend.replay_each(session, &mut |record| {
        if record.sequence == sequence {
            found = Some(turn_idx);
            return Err(stop());
        }
        if segmenter.push(&record.event) {
            turn_idx += 1;
        }
        Ok(())
    });
    match result {
        Err(_) if found.is_some() => {}
        other => other?,
    }
    Ok(found)
}

/// One record of a live poll's answer, clipped to [`MAX_LIVE_RECORD_BYTES`] of text.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LiveRecord {
    /// The record, its text clipped.
    pub record: RecordView,
    /// Bytes of its text the answer left out (the page says so under it).
    pub clipped_bytes: u64,
}

/// What one live poll answers ([`records_after`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LiveBatch {
    /// The records after the one asked for, in order.
    pub records: Vec<LiveRecord>,
    /// Whether the answer stopped at a bound ([`MAX_LIVE_BATCH`] records or
    /// [`MAX_LIVE_BYTES`] of text) with more to come: the page asks again straight away.
    pub full: bool,
    /// Bytes of text the answer holds.
    pub text_bytes: u64,
    /// Where the next poll resumes: the mark after the last record returned (or skipped as
    /// not newer than the one asked for).
    pub mark: ReadMark,
    /// Records the backend handed over to answer: what shows that a poll from a mark reads
    /// only what was appended since.
    pub records_read: u64,
}

/// Records after `after` (all records when `None`), read on from `from` (a mark at or before
/// `after`, or [`ReadMark::START`]): what a live page polls for.
///
/// The answer is bounded in records ([`MAX_LIVE_BATCH`]) and in bytes: each record keeps at
/// most [`MAX_LIVE_RECORD_BYTES`] of text ([`LiveRecord::clipped_bytes`] says how much was
/// cut), and the answer stops once it holds [`MAX_LIVE_BYTES`]. A session of 31 MiB records is
/// followed one clipped record a poll, never answered whole. Memory is the answer plus the
/// one record being decoded. A mark that no longer describes the file (it was replaced) is
/// dropped and the session read from its start.
pub fn records_after(
    backend: &dyn SessionBackend,
    session: &str,
    after: Option<u64>,
    from: &ReadMark,
) -> Result<LiveBatch, ViewError> {
    let mut from = *from;
    loop {
        let mut batch = LiveBatch {
            records: Vec::new(),
            full: false,
            text_bytes: 0,
            mark: from,
            records_read: 0,
        };
        let result = backend.replay_after(session, &from, &mut |record, mark| {
            batch.records_read += 1;
            batch.mark = *mark;
            if after.is_some_and(|after| record.sequence <= after) {
                return Ok(());
            }
            let mut view = RecordView::from(record);
            let mut budget = MAX_LIVE_RECORD_BYTES;
            let clipped_bytes = clip::clip_event(&mut view.event, &mut budget);
            batch.text_bytes += (MAX_LIVE_RECORD_BYTES - budget) as u64;
            batch.records.push(LiveRecord {
                record: view,
                clipped_bytes,
            });
            if batch.records.len() >= MAX_LIVE_BATCH || batch.text_bytes >= MAX_LIVE_BYTES as u64 {
                batch.full = true;
                return Err(stop());
            }
            Ok(())
        });
        match result {
            Ok(ReadAfter::Read(mark)) => {
                batch.mark = mark;
                return Ok(batch);
            }
            Ok(ReadAfter::Stale) if from != ReadMark::START => from = ReadMark::START,
            // A read from the start is never stale (nor anything newer the store may say):
            // what was read is what there is.
            Ok(_) => return Ok(batch),
            Err(_) if batch.full => return Ok(batch),
            Err(error) => return Err(error.into()),
        }
    }
}

/// [`records_after`] for a live page: it resumes where this session's previous poll (or its
/// last page) stopped, so a poll costs what was appended since, not the session
/// ([`crate::marks`]).
pub fn live_poll(
    located: &Located,
    session: &str,
    after: Option<u64>,
) -> Result<LiveBatch, ViewError> {
    let key = crate::marks::key(&located.place(), session);
    let from = crate::marks::live_from(&key, after);
    let batch = records_after(located, session, after, &from)?;
    crate::marks::remember_live(&key, batch.mark);
    Ok(batch)
}

/// The refusal a visitor returns to end a read early; the caller knows it asked for it.
fn stop() -> PluginError {
    PluginError::validation("cuca-view", "read stopped: the page has what it shows")
}

#[cfg(test)]
mod tests;
