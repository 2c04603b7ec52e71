//! The ledger's tables, their upgrades, and per-connection settings.

/// Bumped when the schema changes incompatibly.
pub(super) const SCHEMA_VERSION: i64 = 4;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS apps (
    app_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    session TEXT NOT NULL,
    state TEXT NOT NULL,
    msg TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    ended REAL,
    log_dir TEXT NOT NULL,
    num_restarts INTEGER NOT NULL DEFAULT 0,
    supervisor_pid INTEGER,
    supervisor_start INTEGER,
    submitter_pid INTEGER NOT NULL,
    submitter_start INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    cgroup TEXT,
    host TEXT
);
-- Covers `list`, which then never reads the table itself.
CREATE INDEX IF NOT EXISTS apps_list ON apps(created, name, app_id, state, ended, supervisor_pid,
    supervisor_start, submitter_pid, submitter_start, cancel_requested, host);
-- The bulky parts live apart, so that `list` reads only small rows.
CREATE TABLE IF NOT EXISTS specs (
    app_id TEXT PRIMARY KEY,
    app_json TEXT NOT NULL,
    request_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS replicas (
    app_id TEXT NOT NULL,
    role_idx INTEGER NOT NULL,
    replica_id INTEGER NOT NULL,
    role TEXT NOT NULL,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    pid_start INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    msg TEXT NOT NULL DEFAULT '',
    started REAL,
    ended REAL,
    stdout TEXT NOT NULL,
    stderr TEXT NOT NULL,
    combined TEXT NOT NULL,
    error_file TEXT NOT NULL,
    PRIMARY KEY (app_id, role_idx, replica_id)
);
CREATE TABLE IF NOT EXISTS attempts (
    app_id TEXT NOT NULL,
    role_idx INTEGER NOT NULL,
    replica_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    started REAL,
    ended REAL,
    reason TEXT,
    PRIMARY KEY (app_id, role_idx, replica_id, attempt)
);
";

/// What brings a ledger of each older schema version to the current one, in order.
pub(super) const MIGRATIONS: [(i64, &str); 3] = [
    // Version 2: why each attempt ended (`succeeded`, `requeued`, `timeout`, ...).
    (1, "ALTER TABLE attempts ADD COLUMN reason TEXT;"),
    // Version 3: the cgroup that holds every process of the app's replicas.
    (2, "ALTER TABLE apps ADD COLUMN cgroup TEXT;"),
    // Version 4: the host (name and boot) its processes run on: a ledger in a state directory
    // that several hosts share never has one judge another's pids.
    (
        3,
        "ALTER TABLE apps ADD COLUMN host TEXT; DROP INDEX IF EXISTS apps_list; \
         CREATE INDEX apps_list ON apps(created, name, app_id, state, ended, supervisor_pid, \
         supervisor_start, submitter_pid, submitter_start, cancel_requested, host);",
    ),
];

/// Per connection: WAL commits without fsync (atomic, durable up to the last checkpoint), and
/// reads through mmap rather than copies.
pub(super) const CONNECTION_PRAGMAS: &str =
    "PRAGMA synchronous=NORMAL; PRAGMA mmap_size=268435456;";
