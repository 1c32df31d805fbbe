//! The versioned migrations that create and evolve the tables, applied by the backend itself.

use postgres::{Client, NoTls};

use crate::config::PostgresConfig;
use crate::error::Error;

/// Migrations in order; a version is applied once and recorded in `cuca_migrations`.
///
/// Applied migrations are never edited: a change to the layout is a new entry at the end.
///
/// * `position` is the append order (replay order), which a writer's sequence numbers need not
///   follow ("backends store records as given").
/// * `(session_id, sequence)` is the primary key, so two writers can never both hold one
///   sequence: the second insert fails instead of overwriting.
/// * `session_id` uses the "C" collation so `ORDER BY session_id` is byte order, the order
///   Rust's `String` sorts in.
/// * `record` is the postcard encoding of `SessionRecord`, the `.cslog` payload; `kind` and
///   `timestamp_ms` repeat two of its fields as queryable columns.
/// * `cuca_fork_counter` mints fork numbers unique across every process using the database.
/// * (2) `cuca_append` is the one way records are appended: under a transaction-scoped
///   advisory lock keyed by the schema and session ([`SESSION_LOCK`]), it refuses a sequence
///   at or below the session's highest and returns that highest, or inserts the row and
///   returns NULL. The lock makes the check and the insert one step for every writer (a
///   unique key alone would let a lower sequence land after a higher one), and as the
///   identity value is drawn under it, `position` order is sequence order within a session.
///   `SET search_path FROM CURRENT` pins the function to the schema it was made in.
/// * (3) `cuca_append_batch` appends many records in one statement (one round trip, one
///   commit, one insert): in array order, under each session's `cuca_append` lock (taken
///   once per session), each row checked against the session's highest sequence as stored
///   or as raised by the batch's earlier rows, so each keeps the sequence rule.
///   Per row it returns NULL (stored), the session's highest sequence (refused), or -1 (not
///   tried: an earlier row of the same session in the batch was refused, and a session must
///   not gain records past a hole). With `p_retry` (the batch is sent again after a broken
///   connection, so its first send may have committed) a row whose exact bytes are already
///   stored at its sequence counts as stored.
/// * (4) The index on `kind` is dropped: no query of the backend used it, and keeping it
///   cost about a fifth of the server's work per appended row (measured on PostgreSQL 15:
///   9.3 against 11.7 ms per 1,000 rows), which is what a recorded stream waits on. A query
///   by kind within a session (`WHERE session_id = … AND kind = …`) still reads only that
///   session's rows through the primary key.
/// * (5) `cuca_objects`: content-addressed blobs by id (`PostgresObjects`), the objects the
///   sessions' workspace snapshots name, so every machine of a fleet can restore them.
pub(crate) const MIGRATIONS: &[(i32, &str)] = &[
    (
    1,
    "CREATE TABLE cuca_session_records (
        position bigint GENERATED ALWAYS AS IDENTITY,
        session_id text COLLATE \"C\" NOT NULL,
        sequence bigint NOT NULL CHECK (sequence >= 0),
        kind text NOT NULL,
        timestamp_ms bigint NOT NULL,
        record bytea NOT NULL,
        PRIMARY KEY (session_id, sequence)
    );
    CREATE UNIQUE INDEX cuca_session_records_replay ON cuca_session_records (session_id, position);
    CREATE INDEX cuca_session_records_kind ON cuca_session_records (kind);
    CREATE SEQUENCE cuca_fork_counter AS bigint MINVALUE 0 START WITH 0;",
    ),
    (
        2,
        "CREATE FUNCTION cuca_append(
            p_session_id text, p_sequence bigint, p_kind text, p_timestamp_ms bigint, p_record bytea
        ) RETURNS bigint
        LANGUAGE plpgsql
        SET search_path FROM CURRENT
        AS $cuca$
        DECLARE
            stored bigint;
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended('cuca_session:' || current_schema() || ':' || p_session_id, 0));
            -- A new statement in a volatile function: it sees what the lock's last holder committed.
            SELECT max(sequence) INTO stored FROM cuca_session_records WHERE session_id = p_session_id;
            IF stored IS NOT NULL AND p_sequence <= stored THEN
                RETURN stored;
            END IF;
            INSERT INTO cuca_session_records (session_id, sequence, kind, timestamp_ms, record)
                VALUES (p_session_id, p_sequence, p_kind, p_timestamp_ms, p_record);
            RETURN NULL;
        END
        $cuca$;",
    ),
    (
        3,
        "CREATE FUNCTION cuca_append_batch(
            p_session_ids text[], p_sequences bigint[], p_kinds text[], p_timestamps bigint[],
            p_records bytea[], p_retry boolean
        ) RETURNS bigint[]
        LANGUAGE plpgsql
        SET search_path FROM CURRENT
        AS $cuca$
        DECLARE
            answers bigint[] := '{}';
            keep boolean[] := '{}';
            seen text[] := '{}';
            highest bigint[] := '{}';
            refused text[] := '{}';
            slot integer;
            top bigint;
            mine bytea;
        BEGIN
            FOR i IN 1 .. coalesce(array_length(p_session_ids, 1), 0) LOOP
                slot := array_position(seen, p_session_ids[i]);
                IF slot IS NULL THEN
                    -- The lock cuca_append takes, once per session and batch; the highest
                    -- sequence read under it, then carried through the batch's own rows.
                    PERFORM pg_advisory_xact_lock(hashtextextended('cuca_session:' || current_schema() || ':' || p_session_ids[i], 0));
                    SELECT max(sequence) INTO top FROM cuca_session_records WHERE session_id = p_session_ids[i];
                    seen := array_append(seen, p_session_ids[i]);
                    highest := array_append(highest, top);
                    slot := array_length(seen, 1);
                END IF;
                IF p_session_ids[i] = ANY(refused) THEN
                    answers := array_append(answers, -1::bigint);
                    keep := array_append(keep, false);
                    CONTINUE;
                END IF;
                IF p_retry THEN
                    SELECT record INTO mine FROM cuca_session_records
                        WHERE session_id = p_session_ids[i] AND sequence = p_sequences[i];
                    IF mine IS NOT NULL AND mine = p_records[i] THEN
                        answers := array_append(answers, NULL::bigint);
                        keep := array_append(keep, false);
                        CONTINUE;
                    END IF;
                END IF;
                IF highest[slot] IS NOT NULL AND p_sequences[i] <= highest[slot] THEN
                    answers := array_append(answers, highest[slot]);
                    keep := array_append(keep, false);
                    refused := array_append(refused, p_session_ids[i]);
                    CONTINUE;
                END IF;
                highest[slot] := p_sequences[i];
                answers := array_append(answers, NULL::bigint);
                keep := array_append(keep, true);
            END LOOP;
            -- One insert for every row kept; ORDER BY keeps the batch's order, which the
            -- identity column records (the locks are held to the commit).
            INSERT INTO cuca_session_records (session_id, sequence, kind, timestamp_ms, record)
                SELECT u.s, u.q, u.k, u.t, u.r
                FROM unnest(p_session_ids, p_sequences, p_kinds, p_timestamps, p_records, keep)
                    WITH ORDINALITY AS u(s, q, k, t, r, kept, idx)
                WHERE u.kept
                ORDER BY u.idx;
            RETURN answers;
        END
        $cuca$;",
    ),
    (4, "DROP INDEX IF EXISTS cuca_session_records_kind;"),
    (
        5,
        "CREATE TABLE IF NOT EXISTS cuca_objects (
            id text COLLATE \"C\" PRIMARY KEY,
            bytes bytea NOT NULL
        );",
    ),
];

/// The advisory lock of one session, taken for the transaction by `cuca_append` and by a
/// fork (`$1` is the session id), so appends and forks of a session take turns.
pub(crate) const SESSION_LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('cuca_session:' || current_schema() || ':' || $1::text, 0))";

/// The newest version this build knows.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |(version, _)| *version)
}

/// A new connection to `config`'s server, its `search_path` the schema, migrated: what every
/// connection of the backend and of the object store starts as. `host` names the server in
/// errors.
pub(crate) fn connect(config: &PostgresConfig, host: &str) -> Result<Client, Error> {
    let mut client = config
        .pg
        .connect(NoTls)
        .map_err(|source| Error::Unreachable {
            host: host.to_owned(),
            source,
        })?;
    client
        .batch_execute(&format!(
            "SET search_path TO {}",
            quote_ident(&config.schema)
        ))
        .map_err(|source| Error::Query {
            operation: "connect",
            host: host.to_owned(),
            source,
        })?;
    migrate(&mut client, &config.schema, host)?;
    Ok(client)
}

/// Creates the schema if missing and applies pending migrations, in one transaction under an
/// advisory lock keyed by the schema name, so processes starting together take turns and each
/// sees the others' work. `search_path` must already name the schema.
pub(crate) fn migrate(client: &mut Client, schema: &str, host: &str) -> Result<(), Error> {
    let query = |source| Error::Query {
        operation: "migrate",
        host: host.to_owned(),
        source,
    };
    let mut tx = client.transaction().map_err(query)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('cuca_migrations:' || $1::text))",
        &[&schema],
    )
    .map_err(query)?;
    // Checked before creating because CREATE SCHEMA IF NOT EXISTS still demands the CREATE
    // privilege on the database, which a fleet's role may lack once an admin made the schema.
    let exists = tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .map_err(query)?
        .is_some();
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA {}", quote_ident(schema)))
            .map_err(query)?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS cuca_migrations (
            version integer PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .map_err(query)?;
    let current: Option<i32> = tx
        .query_one("SELECT max(version) FROM cuca_migrations", &[])
        .map_err(query)?
        .get(0);
    let current = current.unwrap_or(0);
    if current > latest() {
        return Err(Error::SchemaTooNew {
            schema: schema.to_owned(),
            host: host.to_owned(),
            found: current,
            known: latest(),
        });
    }
    for (version, sql) in MIGRATIONS {
        if *version > current {
            tx.batch_execute(sql).map_err(query)?;
            tx.execute(
                "INSERT INTO cuca_migrations (version) VALUES ($1)",
                &[version],
            )
            .map_err(query)?;
        }
    }
    tx.commit().map_err(query)
}

/// A double-quoted identifier. Schema names are validated to `[a-z0-9_]` before they get
/// here; quoting anyway keeps a reserved word such as `user` usable.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
