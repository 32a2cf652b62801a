//! The `abacus` binary: subcommands wiring the Abacus crates together.
//!
//! `abacus serve [--config FILE] [--name value ...]` runs the server. Parameters use Redis's
//! names (`--port 6380 --requirepass secret`); `abacus serve --help` lists them all.
//! `abacus ingest` feeds event files to a server's summarizer; `abacus bench w1z` is the W1
//! Zipfian load generator behind bench/w1z.sh.

// Two `unsafe` items, allowed where they are: jemalloc's options exported under the name
// it reads them from, and telling the keyspace's table that this binary's global allocator
// (jemalloc, below) answers usable sizes (and a test reading an option back).
#![deny(unsafe_code)]

use clap::{Parser, Subcommand};

mod ingest;
mod w1z;

// jemalloc: fast under multi-threaded allocation, and its statistics give INFO an exact
// `used_memory` (see abacus-engine's memory.rs).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options built into the binary (read before `main`; `_RJEM_MALLOC_CONF` in the
/// environment still overrides them, and `huge-pages yes` adds to it).
///
/// `oversize_threshold:0`: allocations over 8 MiB stay in the ordinary arenas instead of a
/// dedicated one that returns their pages to the kernel the moment they are freed. A large
/// reply (a 26 MB TS.WATERFALL, a big LRANGE or DUMP) and the buffers behind it otherwise
/// fault in and zero every page again at each request, and each `Vec` doubling past 8 MiB
/// copies into fresh pages: W7's one-day waterfall spent about a quarter of its CPU there
/// (docs/PERFORMANCE.md, W7). Freed large blocks are now reused, and jemalloc's background
/// threads give them back after the usual decay (10 s), as for every other size.
// SAFETY: jemalloc declares `const char *_rjem_malloc_conf` as a weak symbol and reads it
// once at its initialisation; this strong definition is a pointer (`&[u8; N]` is thin) to a
// NUL-terminated string that lives for the whole program and is never written.
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_OPTIONS: &[u8; 21] = b"oversize_threshold:0\0";

#[derive(Parser)]
#[command(name = "abacus", version, about = "An in-memory analytics store that speaks the Redis protocol")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (port 6379 on 127.0.0.1, data in ./abacus-data by default).
    #[command(after_help = params_help())]
    Serve {
        /// Read parameters from this file (`name value` lines, as redis.conf).
        #[arg(long)]
        config: Option<std::path::PathBuf>,
        /// Parameters as `--name value` pairs, overriding the config file.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "--name value")]
        params: Vec<String>,
    },
    /// Check an append-only log segment (dir/log-NNNNNN.aof) and, with --fix, truncate it to
    /// its last valid record (what a start refuses to guess after corruption).
    CheckAof {
        /// Truncate the file at the first damaged record (everything after it is lost).
        #[arg(long)]
        fix: bool,
        /// Also print every command of the valid records, one per line (time in ms, database,
        /// quoted arguments) on standard output; the report then goes to standard error.
        #[arg(long)]
        print: bool,
        file: std::path::PathBuf,
    },
    /// Check a snapshot file (dir/snap-NNNNNN.abs): structure, every block's checksum and
    /// every key's encoding.
    CheckSnapshot { file: std::path::PathBuf },
    /// Feed event files (or standard input, `-`) to a server's summarizer: batches of lines
    /// sent as SUMMARY.INGESTSOURCE, pipelined, each applied exactly once (see --resume).
    #[command(after_help = "Example:\n  abacus serve --summarizer-rules rules.toml &\n  abacus ingest --feed v1 events-*.csv\n  redis-cli SUMMARY.QUERY by_campaign GROUPBY campaign")]
    Ingest {
        /// The feed (a `[feed.NAME]` of the server's rules) the lines belong to.
        #[arg(long)]
        feed: String,
        #[command(flatten)]
        server: ServerArgs,
        /// About this many bytes of lines per batch.
        #[arg(long, default_value_t = 1 << 20)]
        batch_bytes: usize,
        /// Batches in flight before waiting for a reply.
        #[arg(long, default_value_t = 4)]
        pipeline: usize,
        /// Stop once more than this many lines were rejected (SUMMARY.REJECTS shows them).
        #[arg(long)]
        max_rejects: Option<u64>,
        /// Continue each source where the server says it stopped (exactly once).
        #[arg(long)]
        resume: bool,
        /// Source id (default: each file's canonical path; standard input has none unless given).
        #[arg(long)]
        source: Option<String>,
        /// No progress display.
        #[arg(long, short = 'q')]
        quiet: bool,
        /// Connections per file, each sending a range of it as its own source (the server
        /// parses each connection's batches on that connection's thread). --resume needs the
        /// same value as the interrupted run.
        #[arg(long, default_value_t = 1)]
        connections: usize,
        /// Files to read; `-` or none for standard input.
        files: Vec<String>,
    },
    /// Export from a running server, or a stopped one's data directory (--dir), to one
    /// Parquet file (DuckDB, pandas, Spark read it): a summary (one row per group, exact
    /// decimal sums), streams (nested or --flat), time series, or generic keys. The file
    /// appears whole or not at all.
    #[command(after_help = "Examples:\n  abacus export --summary by_campaign --out campaigns.parquet\n  abacus export --streams 'user:*' --out streams.parquet\n  abacus export --series sensor=temp --out temps.parquet\n  abacus export --dir ./abacus-data --rules rules.toml --summary by_campaign --out campaigns.parquet\n  duckdb -c \"select * from 'campaigns.parquet'\"")]
    Export(ExportArgs),
    /// Load generators for the reference workloads that redis-benchmark cannot drive
    /// (bench/w1z.sh runs them against Redis and Abacus).
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// The server a client subcommand (`ingest`, `bench`) talks to.
#[derive(clap::Args, Clone)]
pub struct ServerArgs {
    #[arg(long, short = 'H', default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, short = 'p', default_value_t = 6379)]
    pub port: u16,
    /// AUTH with this password first.
    #[arg(long, short = 'a')]
    pub password: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// redis-cli's TLS options, for every client subcommand (`ingest`, `export`, `bench`).
#[derive(clap::Args, Clone, Default)]
pub struct TlsArgs {
    /// Connect over TLS (the server's `tls-port`).
    #[arg(long)]
    pub tls: bool,
    /// CA certificate file the server's certificate must chain to (default: the system's).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// Directory of trusted CA certificates.
    #[arg(long, value_name = "DIR")]
    pub cacertdir: Option<std::path::PathBuf>,
    /// Client certificate (for a server with `tls-auth-clients yes`).
    #[arg(long, value_name = "FILE")]
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key.
    #[arg(long, value_name = "FILE")]
    pub key: Option<std::path::PathBuf>,
    /// Server name to send in the handshake (SNI).
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,
    /// Do not check the server's certificate.
    #[arg(long)]
    pub insecure: bool,
}

impl TlsArgs {
    pub fn options(&self) -> abacus_tls::ClientOptions {
        abacus_tls::ClientOptions {
            tls: self.tls,
            cacert: self.cacert.clone(),
            cacertdir: self.cacertdir.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            sni: self.sni.clone(),
            insecure: self.insecure,
        }
    }
}

/// `abacus export`'s arguments: one of --summary, --streams, --series, --keys.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(false).args(["summary", "streams", "series", "keys"])))]
struct ExportArgs {
    #[arg(long, short = 'H', default_value = "127.0.0.1")]
    host: String,
    #[arg(long, short = 'p', default_value_t = 6379)]
    port: u16,
    /// ACL user (with --pass).
    #[arg(long)]
    user: Option<String>,
    /// Password (AUTH).
    #[arg(long, short = 'a')]
    pass: Option<String>,
    /// The Parquet file to write (replaced only once complete).
    #[arg(long)]
    out: std::path::PathBuf,
    /// Offline: read this stopped server's data directory (snapshot plus log) instead of a
    /// server; nothing in it is written.
    #[arg(long, conflicts_with_all = ["user", "pass"])]
    dir: Option<std::path::PathBuf>,
    /// With --dir and --summary: the summarizer rules file the server ran with.
    #[arg(long, requires = "dir")]
    rules: Option<std::path::PathBuf>,
    /// With --dir: read a log whose last record is incomplete (a crash during a write) up to
    /// its last complete record, as the server loads it; without it such a log is refused.
    #[arg(long, requires = "dir")]
    skip_torn_tail: bool,
    /// A summary of the server's rules: one row per (dimensions, bucket).
    #[arg(long)]
    summary: Option<String>,
    /// With --summary: buckets starting at or after this Unix time (seconds).
    #[arg(long, requires = "summary")]
    from: Option<i64>,
    /// With --summary: buckets starting before this Unix time (seconds).
    #[arg(long, requires = "summary")]
    to: Option<i64>,
    /// Streams whose keys match this pattern: one row per stream, entries nested.
    #[arg(long)]
    streams: Option<String>,
    /// With --streams: one row per entry.
    #[arg(long, requires = "streams")]
    flat: bool,
    /// Time series selected by TS filters (label=value ...): one row per sample.
    #[arg(long, num_args = 1..)]
    series: Option<Vec<String>>,
    /// Strings, hashes, sets, sorted sets and lists whose keys match: one row per element.
    #[arg(long)]
    keys: Option<String>,
    /// zstd, snappy or none.
    #[arg(long, default_value = "zstd")]
    compression: String,
    /// No progress line.
    #[arg(long, short = 'q')]
    quiet: bool,
    #[command(flatten)]
    tls: TlsArgs,
}

fn export(a: ExportArgs) -> Result<String, String> {
    let what = if let Some(name) = a.summary {
        abacus_export::What::Summary { name, from: a.from, to: a.to }
    } else if let Some(pattern) = a.streams {
        abacus_export::What::Streams { pattern, flat: a.flat }
    } else if let Some(filters) = a.series {
        abacus_export::What::Series { filters }
    } else if let Some(pattern) = a.keys {
        abacus_export::What::Keys { pattern }
    } else {
        return Err("one of --summary, --streams, --series or --keys is needed".into());
    };
    let codec = abacus_export::Codec::parse(&a.compression)?;
    match a.dir {
        None => abacus_export::run(&abacus_export::Options { host: a.host, port: a.port, user: a.user, pass: a.pass, tls: a.tls.options(), out: a.out, what, codec, progress: !a.quiet }),
        Some(dir) => export_offline(&dir, a.rules.as_deref(), a.skip_torn_tail, &what, &a.out, codec, !a.quiet),
    }
}

/// `abacus export --dir`: the data directory loaded in process, read-only, then the same
/// layout writers as online.
fn export_offline(dir: &std::path::Path, rules: Option<&std::path::Path>, skip_torn_tail: bool, what: &abacus_export::What, out: &std::path::Path, codec: abacus_export::Codec, progress: bool) -> Result<String, String> {
    abacus_export::check_out(out)?;
    // Never a file in the directory read: not even the temporary beside --out.
    let out_dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(out_dir), std::fs::canonicalize(dir)) {
        if a.starts_with(&b) {
            return Err(format!("--out {} is inside the data directory {}: the offline export never writes there", out.display(), dir.display()));
        }
    }
    let rules = match rules {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| format!("--rules {}: {e}", p.display()))?),
        None => None,
    };
    let started = std::time::Instant::now();
    let mut source = abacus_server::export::offline::Loaded::open(dir, rules, skip_torn_tail)?;
    if let Some(note) = &source.skipped_tail {
        // Always said, even with --quiet: the file holds less than the log's bytes.
        eprintln!("note: {note}");
    }
    if progress {
        eprintln!(
            "loaded {}: {} keys from the snapshot, {} commands from the log in {:.2} s",
            dir.display(),
            source.keys_loaded,
            source.commands_replayed,
            started.elapsed().as_secs_f64()
        );
    }
    abacus_export::run_on(&mut source, what, out, codec, progress)
}

#[derive(Subcommand)]
enum BenchCommand {
    /// W1 Zipfian (issue 27): 16-byte APPENDs onto keys of Zipfian popularity at a fixed rate,
    /// open loop; per-interval RSS, used_memory, payload, and write and PING latency.
    W1z(w1z::Args),
}

fn params_help() -> String {
    let mut s = String::from("Parameters (default in brackets):\n");
    for p in abacus_engine::config::PARAMS {
        s.push_str(&format!("  --{:<28} {} [{}]\n", p.name, p.help, p.default));
    }
    s
}

/// jemalloc's options, read once at its start (before `main`): `huge-pages yes` sets its
/// `thp:always` there.
const JEMALLOC_CONF: &str = "_RJEM_MALLOC_CONF";

/// Makes jemalloc back the heap with transparent huge pages (`huge-pages yes`). jemalloc
/// reads its options before `main` runs, so the server starts itself again, once, with
/// `thp:always` added to them (an `exec`: the same process id, nothing yet opened but the
/// log); if that fails, or the kernel has THP off, it runs on with normal pages and says so.
fn huge_pages() {
    let thp_mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if thp_mode.contains("[never]") || thp_mode.is_empty() {
        tracing::warn!("huge-pages yes: the kernel's transparent huge pages are off (/sys/kernel/mm/transparent_hugepage/enabled); running with normal pages");
        return;
    }
    let conf = std::env::var(JEMALLOC_CONF).unwrap_or_default();
    if conf.contains("thp:") {
        tracing::info!("huge-pages yes: jemalloc runs with {conf}");
        return;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("huge-pages yes: cannot find this executable to restart it ({e}); running with normal pages");
            return;
        }
    };
    let conf = if conf.is_empty() { "thp:always".to_string() } else { format!("{conf},thp:always") };
    use std::os::unix::process::CommandExt;
    let e = std::process::Command::new(exe).args(std::env::args_os().skip(1)).env(JEMALLOC_CONF, conf).exec();
    tracing::warn!("huge-pages yes: restarting with jemalloc's thp:always failed ({e}); running with normal pages");
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, mut params } => {
            // `--config` may also appear among the trailing parameters.
            let mut config = config;
            if let Some(i) = params.iter().position(|p| p == "--config") {
                if i + 1 < params.len() {
                    config = Some(params[i + 1].clone().into());
                    params.drain(i..=i + 1);
                }
            }
            let text = match &config {
                Some(path) => match std::fs::read_to_string(path) {
                    Ok(t) => Some(t),
                    Err(e) => fail(&format!("cannot read config file {}: {e}", path.display())),
                },
                None => None,
            };
            let mut cfg = match abacus_engine::Config::from_sources(text.as_deref(), &params) {
                Ok(c) => c,
                Err(e) => fail(&e),
            };
            if let Some(path) = &config {
                cfg.set_config_file(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
            }
            init_logging(&cfg.get(abacus_engine::param!("loglevel")));
            if cfg.get(abacus_engine::param!("huge-pages")) == "yes" {
                huge_pages();
            }
            if !abacus_engine::memory::enable_background_purge() {
                tracing::warn!("jemalloc background threads did not start: freed memory returns to the OS only while allocating");
            }
            // SAFETY: the global allocator is jemalloc (GLOBAL above), and its usable_size
            // (`sallocx`) answers for every live allocation it made, as the table requires.
            #[allow(unsafe_code)]
            let _ = unsafe { abacus_table::return_allocation_slack(tikv_jemallocator::usable_size::<u8>) };
            if let Err(e) = abacus_server::run(cfg) {
                fail(&e);
            }
        }
        Command::Ingest { feed, server: ServerArgs { host, port, password, tls }, batch_bytes, pipeline, max_rejects, resume, source, quiet, connections, files } => {
            let opts = ingest::Options { feed, host, port, password, tls: tls.options(), batch_bytes, pipeline, max_rejects, resume, source, quiet, connections, files };
            if let Err(e) = ingest::run(opts) {
                fail(&e);
            }
        }
        Command::Export(args) => match export(args) {
            Ok(line) => eprintln!("{line}"),
            Err(e) => fail(&format!("export: {e}")),
        },
        Command::Bench(BenchCommand::W1z(args)) => {
            if let Err(e) = w1z::run(args) {
                fail(&e);
            }
        }
        Command::CheckAof { fix, print, file } => {
            // Truncating a log a running server appends to would cut its acknowledged writes:
            // --fix takes the data directory's lock (held until the process exits), or refuses.
            let _lock = if fix {
                match abacus_persist::dirlock::DirLock::acquire(data_dir_of(&file), "abacus check-aof --fix") {
                    Ok(l) => Some(l),
                    Err(e) => fail(&format!("not fixing {}: {e}. Stop the server first", file.display())),
                }
            } else {
                note_if_in_use(&file);
                None
            };
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let listing = print.then_some(&mut out as &mut dyn std::io::Write);
            match abacus_persist::log::check_file(&file, fix, listing) {
                Ok(report) => {
                    drop(out);
                    // With --print, standard output is the listing: the report goes aside.
                    if print {
                        eprint!("{report}");
                    } else {
                        print!("{report}");
                    }
                    if !fix && !report.contains("log is valid") {
                        std::process::exit(1);
                    }
                }
                Err(e) => fail(&e),
            }
        }
        Command::CheckSnapshot { file } => {
            note_if_in_use(&file);
            match abacus_persist::snapshot::check_file(&file) {
                Ok(report) => print!("{report}"),
                Err(e) => fail(&e),
            }
        }
    }
}

/// The data directory a log or snapshot file belongs to.
fn data_dir_of(file: &std::path::Path) -> &std::path::Path {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    }
}

/// The checkers only read: they may run beside a server, with a note that the files they read
/// are live.
fn note_if_in_use(file: &std::path::Path) {
    if let Some(holder) = abacus_persist::dirlock::DirLock::holder(data_dir_of(file)) {
        eprintln!("abacus: note: a server is using this data directory ({holder}); its files may change while they are checked");
    }
}

fn init_logging(level: &str) {
    let filter = match level {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    };
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        // Colours only for a person watching: log files and pipes get plain text.
        .with_ansi(std::io::stdout().is_terminal())
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)))
        .init();
}

fn fail(msg: &str) -> ! {
    eprintln!("abacus: {msg}");
    std::process::exit(1);
}

#[cfg(test)]
mod tests {
    /// The option built into the binary reaches jemalloc (a wrong symbol name or a fat
    /// pointer would leave it at its default, 8 MiB, and nothing else would notice).
    #[test]
    #[allow(unsafe_code)]
    fn jemalloc_reads_the_built_in_options() {
        if std::env::var_os(super::JEMALLOC_CONF).is_some() {
            return; // the environment overrides the built-in options
        }
        // SAFETY: `opt.oversize_threshold` is a `size_t`, read as the `usize` it is.
        let v: usize =
            unsafe { tikv_jemalloc_ctl::raw::read(b"opt.oversize_threshold\0") }.expect("readable");
        assert_eq!(v, 0);
    }
}
