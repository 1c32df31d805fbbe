//! PostgresBackend against a real server (`CUCA_PG_URL`): what the conformance suite cannot
//! see — the rows, the migrations, two writers, runtimes, and connections that break.

// A test binary: its helpers (the proxy, `same_schema`) panic on failure like its tests do.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_store_postgres::{Error, PostgresBackend, PostgresConfig};
use cuca_testkit::{append_all, demo_turn, record};
use postgres::config::Host;

/// The typed error inside a `PluginError::Backend { backend: "postgres", .. }`.
fn typed(error: &PluginError) -> &Error {
    match error {
        PluginError::Backend {
            backend,
            source: Some(source),
            ..
        } if backend == "postgres" => match source.downcast_ref::<Error>() {
            Some(typed) => typed,
            None => panic!("source is not a cuca_store_postgres::Error: {error:?}"),
        },
        other => panic!("expected a postgres Backend error, got {other:?}"),
    }
}

/// A second backend on the first one's schema, as a second process would have.
fn same_schema(url: &str, first: &PostgresBackend) -> PostgresBackend {
    let config = PostgresConfig::new(url)
        .unwrap()
        .with_schema(first.schema())
        .unwrap();
    PostgresBackend::connect(config).unwrap()
}

/// "`(session_id, sequence)` primary key so two writers can never both hold one sequence — the
/// loser gets a clear PluginError … never a silent overwrite"
#[test]
fn two_writers_cannot_both_hold_one_sequence() {
    let Some(url) = common::url() else { return };
    let first = common::backend(&url);
    let second = same_schema(&url, &first);
    let mine = record(
        "demo",
        0,
        SessionEvent::Output {
            text: "first".into(),
        },
    );
    first.append(mine.clone()).unwrap();
    let error = second
        .append(record(
            "demo",
            0,
            SessionEvent::Output {
                text: "second".into(),
            },
        ))
        .unwrap_err();
    assert!(
        matches!(&error, PluginError::SequenceTaken { session_id, sequence: 0, last: 0 } if session_id == "demo"),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("session \"demo\" already holds sequence 0"),
        "{error}"
    );
    assert_eq!(first.replay("demo").unwrap(), vec![mine.clone()]);
    assert_eq!(second.replay("demo").unwrap(), vec![mine]);
}

/// "records stored as the same postcard bytes .cslog uses … plus queryable columns"
#[test]
fn rows_hold_postcard_bytes_and_queryable_columns() {
    let Some(url) = common::url() else { return };
    let backend = common::backend(&url);
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn);
    let mut admin = common::admin(&url);
    let rows = admin
        .query(
            &format!(
                "SELECT session_id, sequence, kind, timestamp_ms, record FROM {}.cuca_session_records ORDER BY position",
                backend.schema()
            ),
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), turn.len());
    for (row, record) in rows.iter().zip(&turn) {
        assert_eq!(row.get::<_, String>(0), record.session_id);
        assert_eq!(row.get::<_, i64>(1), record.sequence as i64);
        assert_eq!(row.get::<_, String>(2), record.event.kind());
        assert_eq!(row.get::<_, i64>(3), record.timestamp_ms as i64);
        assert_eq!(
            row.get::<_, Vec<u8>>(4),
            postcard::to_stdvec(record).unwrap()
        );
    }
}

/// "a cuca_migrations table with the applied version; migrations idempotent and run in a
/// transaction under an advisory lock so two processes starting together don't race"
#[test]
fn processes_starting_together_migrate_once() {
    let Some(url) = common::url() else { return };
    let schema = common::throwaway(&url).schema().to_owned();
    let n_processes = 6;
    let barrier = Arc::new(Barrier::new(n_processes));
    let starters: Vec<JoinHandle<Result<PostgresBackend, PluginError>>> = (0..n_processes)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            let config = PostgresConfig::new(&url)
                .unwrap()
                .with_schema(&schema)
                .unwrap();
            std::thread::spawn(move || {
                barrier.wait();
                PostgresBackend::connect(config)
            })
        })
        .collect();
    let backends: Vec<PostgresBackend> = starters
        .into_iter()
        .map(|starter| starter.join().unwrap().unwrap())
        .collect();
    let mut admin = common::admin(&url);
    let versions: Vec<i32> = admin
        .query(
            &format!("SELECT version FROM {schema}.cuca_migrations ORDER BY version"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(versions, vec![1, 2, 3, 4, 5]);
    // Every one of them writes into the same table.
    for (sequence, backend) in backends.iter().enumerate() {
        backend
            .append(record(
                "shared",
                sequence as u64,
                SessionEvent::Output { text: "x".into() },
            ))
            .unwrap();
    }
    assert_eq!(backends[0].replay("shared").unwrap().len(), n_processes);
    drop(backends);
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

/// A schema migrated by a newer build is refused rather than written into.
#[test]
fn a_schema_from_a_newer_build_is_refused() {
    let Some(url) = common::url() else { return };
    let backend = common::backend(&url);
    let mut admin = common::admin(&url);
    admin
        .execute(
            &format!(
                "INSERT INTO {}.cuca_migrations (version) VALUES (99)",
                backend.schema()
            ),
            &[],
        )
        .unwrap();
    let config = PostgresConfig::new(&url)
        .unwrap()
        .with_schema(backend.schema())
        .unwrap();
    let error = PostgresBackend::connect(config).unwrap_err();
    assert!(
        matches!(
            typed(&error),
            Error::SchemaTooNew {
                found: 99,
                known: 5,
                ..
            }
        ),
        "{error:?}"
    );
}

/// "the fork counter is unique across machines: a database sequence (nextval) mints n"
#[test]
fn forks_from_two_processes_never_share_an_id() {
    let Some(url) = common::url() else { return };
    let first = common::backend(&url);
    let second = same_schema(&url, &first);
    append_all(&first, &demo_turn("demo", 0));
    let a = first.fork("demo", "demo:1").unwrap();
    let b = second.fork("demo", "demo:1").unwrap();
    assert_eq!(a, "demo:fork:demo:1:0");
    assert_eq!(b, "demo:fork:demo:1:1");
    let original = first.replay("demo").unwrap();
    let audits: Vec<(u64, &SessionEvent)> = original[7..]
        .iter()
        .map(|record| (record.sequence, &record.event))
        .collect();
    assert_eq!(
        audits,
        vec![
            (
                7,
                &SessionEvent::Fork {
                    from_point: "demo:1".into(),
                    to_session: a.clone()
                }
            ),
            (
                8,
                &SessionEvent::Fork {
                    from_point: "demo:1".into(),
                    to_session: b.clone()
                }
            ),
        ]
    );
}

/// "fork in one transaction: the prefix copied and relabelled and the Fork audit record
/// appended …, or nothing"
#[test]
fn a_fork_that_fails_at_its_last_step_leaves_nothing_behind() {
    let Some(url) = common::url() else { return };
    let backend = common::backend(&url);
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn);
    // Make the very last insert of the fork (the audit record) fail, after the prefix is in.
    let mut admin = common::admin(&url);
    admin
        .batch_execute(&format!(
            "CREATE FUNCTION {schema}.refuse_fork() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN RAISE EXCEPTION 'no audit records today'; END $$;
             CREATE TRIGGER refuse_fork BEFORE INSERT ON {schema}.cuca_session_records
               FOR EACH ROW WHEN (NEW.kind = 'Fork') EXECUTE FUNCTION {schema}.refuse_fork();",
            schema = backend.schema()
        ))
        .unwrap();
    let error = backend.fork("demo", "demo:3").unwrap_err();
    assert!(
        matches!(
            typed(&error),
            Error::Query {
                operation: "fork",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("no audit records today"),
        "{error}"
    );
    assert_eq!(backend.sessions().unwrap(), vec!["demo".to_owned()]);
    assert_eq!(backend.replay("demo").unwrap(), turn);
    assert_eq!(backend.gauge().records, Some(turn.len() as u64));
}

/// A stored row that does not decode is reported with its session and sequence, not skipped.
#[test]
fn a_damaged_row_is_reported_not_skipped() {
    let Some(url) = common::url() else { return };
    let backend = common::backend(&url);
    append_all(&backend, &demo_turn("demo", 0));
    let mut admin = common::admin(&url);
    admin
        .execute(
            &format!(
                "UPDATE {}.cuca_session_records SET record = record || '\\x00'::bytea WHERE sequence = 3",
                backend.schema()
            ),
            &[],
        )
        .unwrap();
    let error = backend.replay("demo").unwrap_err();
    assert!(
        matches!(typed(&error), Error::Corrupt { session_id, sequence: 3, .. } if session_id == "demo"),
        "{error:?}"
    );
}

/// "call the backend from inside #[tokio::test(flavor = "multi_thread")]"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_inside_a_multi_thread_runtime() {
    let Some(url) = common::url() else { return };
    let backend = PostgresBackend::connect(common::throwaway(&url)).unwrap();
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn);
    let branch = backend.fork("demo", "demo:1").unwrap();
    assert_eq!(backend.replay(&branch).unwrap().len(), 2);
    // And from a spawned task on a worker thread, as a plugin hook runs.
    let backend = Arc::new(backend);
    let task = {
        let backend = Arc::clone(&backend);
        tokio::spawn(async move { backend.replay("demo").map(|records| records.len()) })
    };
    assert_eq!(task.await.unwrap().unwrap(), turn.len() + 1);
}

/// "… and from current_thread"
#[tokio::test(flavor = "current_thread")]
async fn works_inside_a_current_thread_runtime() {
    let Some(url) = common::url() else { return };
    let backend = PostgresBackend::connect(common::throwaway(&url)).unwrap();
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn);
    assert_eq!(backend.replay("demo").unwrap(), turn);
    assert_eq!(backend.sessions().unwrap(), vec!["demo".to_owned()]);
    assert_eq!(backend.gauge().records, Some(7));
}

/// "Reconnect on a broken connection … nothing acknowledged is lost"
#[test]
fn a_terminated_connection_is_reopened_and_nothing_acknowledged_is_lost() {
    let Some(url) = common::url() else { return };
    let config = common::throwaway(&url);
    let app = config.application_name().unwrap().to_owned();
    let backend = PostgresBackend::connect(config).unwrap();
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn[..3]);
    let mut admin = common::admin(&url);
    let terminated: Vec<bool> = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        terminated,
        vec![true],
        "exactly the backend's one connection"
    );
    append_all(&backend, &turn[3..]);
    assert_eq!(backend.replay("demo").unwrap(), turn);
}

/// A loopback TCP proxy in front of the server that the test can cut and restore, to make the
/// database unreachable without stopping the shared server.
struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on `port` (0: any free one) and forwards every connection to `upstream`.
    fn start(upstream: &str, port: u16) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let accept = {
            let (stop, streams, upstream) =
                (Arc::clone(&stop), Arc::clone(&streams), upstream.to_owned());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break; // the listener is dropped here: the port refuses from now on
                    }
                    let (Ok(client), Ok(server)) = (client, TcpStream::connect(&upstream)) else {
                        continue;
                    };
                    for (from, to) in [(&client, &server), (&server, &client)] {
                        let (mut from, mut to) =
                            (from.try_clone().unwrap(), to.try_clone().unwrap());
                        std::thread::spawn(move || {
                            let mut buf = [0u8; 16384];
                            while let Ok(n) = from.read(&mut buf) {
                                if n == 0 || to.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                            let _ = to.shutdown(Shutdown::Both);
                        });
                    }
                    streams.lock().unwrap().extend([client, server]);
                }
            })
        };
        Proxy {
            port,
            stop,
            streams,
            accept: Some(accept),
        }
    }

    /// Stops listening and closes every proxied connection, as a dead server would.
    fn cut(&mut self) {
        if let Some(accept) = self.accept.take() {
            self.stop.store(true, Ordering::SeqCst);
            // A connection makes `incoming` yield, so the loop sees the flag.
            let _ = TcpStream::connect(("127.0.0.1", self.port));
            accept.join().unwrap();
        }
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// "when the database is unreachable, a clear PluginError::Backend { backend: "postgres", … }
/// naming the host, and nothing acknowledged is lost"
#[test]
fn an_unreachable_database_fails_clearly_and_loses_nothing_acknowledged() {
    let Some(url) = common::url() else { return };
    let pg: postgres::Config = url.parse().unwrap();
    let (Some(Host::Tcp(server)), Some(server_port)) =
        (pg.get_hosts().first(), pg.get_ports().first())
    else {
        eprintln!("skipped: the proxy test needs a TCP server, CUCA_PG_URL={url:?} is not one");
        return;
    };
    let upstream = format!("{server}:{server_port}");
    let mut proxy = Proxy::start(&upstream, 0);
    let port = proxy.port;
    let mut via_proxy = format!(
        "host=127.0.0.1 port={port} dbname={}",
        pg.get_dbname().unwrap_or("postgres")
    );
    if let Some(user) = pg.get_user() {
        via_proxy.push_str(&format!(" user={user}"));
    }
    if let Some(password) = pg.get_password() {
        via_proxy.push_str(&format!(" password={}", String::from_utf8_lossy(password)));
    }
    let config = PostgresConfig::new(&via_proxy)
        .unwrap()
        .with_throwaway_schema();
    let backend = PostgresBackend::connect(config).unwrap();
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn[..4]);

    proxy.cut();
    let host = format!("127.0.0.1:{port}/{}", pg.get_dbname().unwrap_or("postgres"));
    let refused = backend.append(turn[4].clone()).unwrap_err();
    assert!(
        matches!(typed(&refused), Error::Unreachable { host: named, .. } if *named == host),
        "{refused:?}"
    );
    assert!(
        refused
            .to_string()
            .contains(&format!("cannot reach postgres at {host}")),
        "{refused}"
    );
    let unreadable = backend.replay("demo").unwrap_err();
    assert!(
        matches!(typed(&unreadable), Error::Unreachable { .. }),
        "{unreadable:?}"
    );

    // The server is back: the backend reconnects by itself and every acknowledged record is there.
    let _proxy = Proxy::start(&upstream, port);
    assert_eq!(backend.replay("demo").unwrap(), turn[..4].to_vec());
    append_all(&backend, &turn[4..]);
    assert_eq!(backend.replay("demo").unwrap(), turn);
    // Dropped while the proxy still forwards, so its throwaway schema can be dropped too.
    drop(backend);
}

/// "Sequences are strictly increasing per session in every store": writers on four
/// connections draw sequences from one counter and race to append them. Whatever arrives
/// after a higher sequence is refused with `SequenceTaken`; what is stored replays strictly
/// increasing, because the check and the insert are one step under the session's lock (a
/// primary key alone would let 7 land after 9).
#[test]
fn racing_writers_never_store_a_lower_sequence_after_a_higher_one() {
    let Some(url) = common::url() else { return };
    let first = common::backend(&url);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(4));
    let writers: Vec<JoinHandle<(u64, u64)>> = (0..4)
        .map(|_| {
            let backend = same_schema(&url, &first);
            let (next, barrier) = (Arc::clone(&next), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let (mut stored, mut refused) = (0, 0);
                for _ in 0..100 {
                    let sequence = next.fetch_add(1, Ordering::SeqCst);
                    let record = record("race", sequence, SessionEvent::Latency { duration_ms: 1 });
                    match backend.append(record) {
                        Ok(()) => stored += 1,
                        Err(PluginError::SequenceTaken {
                            session_id,
                            sequence: s,
                            last,
                        }) => {
                            assert_eq!((session_id.as_str(), s), ("race", sequence));
                            assert!(last > sequence, "refused {sequence} below {last}");
                            refused += 1;
                        }
                        Err(error) => panic!("{error}"),
                    }
                }
                (stored, refused)
            })
        })
        .collect();
    let (stored, refused) = writers
        .into_iter()
        .map(|writer| writer.join().unwrap())
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
    assert_eq!(stored + refused, 400);
    let replayed = first.replay("race").unwrap();
    assert_eq!(replayed.len() as u64, stored);
    assert!(
        replayed
            .windows(2)
            .all(|pair| pair[0].sequence < pair[1].sequence),
        "replay order is not increasing: {:?}",
        replayed.iter().map(|r| r.sequence).collect::<Vec<_>>()
    );
    eprintln!("FIGURES postgres race: stored={stored} refused={refused}");
}

/// A schema made by a build before the sequence rule (at migration 1, holding records) is
/// migrated to the latest on connect: its records stay, and the rule holds from then on.
#[test]
fn a_schema_from_before_the_sequence_rule_is_migrated_and_keeps_its_records() {
    let Some(url) = common::url() else { return };
    let backend = common::backend(&url);
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn);
    let schema = backend.schema().to_owned();
    let mut admin = common::admin(&url);
    // Back to what migration 1 left, as an older build would have: no functions, the index on
    // kind, version 1.
    admin
        .batch_execute(&format!(
            "DROP FUNCTION {schema}.cuca_append_batch; DROP FUNCTION {schema}.cuca_append;
             CREATE INDEX cuca_session_records_kind ON {schema}.cuca_session_records (kind);
             DELETE FROM {schema}.cuca_migrations WHERE version >= 2"
        ))
        .unwrap();
    let config = PostgresConfig::new(&url)
        .unwrap()
        .with_schema(&schema)
        .unwrap();
    let upgraded = PostgresBackend::connect(config).unwrap();
    assert_eq!(upgraded.replay("demo").unwrap(), turn);
    let stale = record("demo", 3, SessionEvent::Latency { duration_ms: 1 });
    assert!(matches!(
        upgraded.append(stale),
        Err(PluginError::SequenceTaken { last: 6, .. })
    ));
    upgraded
        .append(record("demo", 7, SessionEvent::Latency { duration_ms: 1 }))
        .unwrap();
    assert_eq!(backend.replay("demo").unwrap().len(), turn.len() + 1);
    let indexes: Vec<String> = admin
        .query(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = $1 ORDER BY 1",
            &[&schema],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        indexes,
        [
            "cuca_migrations_pkey",
            "cuca_objects_pkey",
            "cuca_session_records_pkey",
            "cuca_session_records_replay"
        ],
        "migration 4 dropped the index on kind"
    );
}

/// `cuca sessions` and `cuca verify` over a database show each session's size, not
/// 0: the bytes of its stored records, every session in one query, the same figure a
/// `.cslog` holds less its frames' headers.
#[test]
fn session_sizes_are_the_bytes_of_each_sessions_records_in_one_query() {
    let Some(url) = common::url() else { return };
    let backend = common::backend(&url);
    assert_eq!(backend.session_sizes().unwrap(), []);
    let long = "x".repeat(5_000);
    for (sequence, text) in ["a", long.as_str()].into_iter().enumerate() {
        backend
            .append(record(
                "big",
                sequence as u64,
                SessionEvent::Output { text: text.into() },
            ))
            .unwrap();
    }
    backend
        .append(record(
            "small",
            0,
            SessionEvent::Output { text: "b".into() },
        ))
        .unwrap();
    let encoded = |session: &str| -> u64 {
        backend
            .replay(session)
            .unwrap()
            .iter()
            .map(|r| postcard::to_stdvec(r).unwrap().len() as u64)
            .sum()
    };
    let sizes = backend.session_sizes().unwrap();
    assert_eq!(
        sizes,
        [
            ("big".to_owned(), encoded("big")),
            ("small".to_owned(), encoded("small"))
        ]
    );
    assert!(sizes[0].1 > 5_000, "{sizes:?}");
}
