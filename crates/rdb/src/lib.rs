//! Redis's RDB format, version 10 (Redis 7.0), and the DUMP/RESTORE payload built on it: core values
//! to bytes and back. Nothing here knows about shards, threads or files beyond `Read`/`Write`.
//!
//! * [`encode_key`] writes one key's record (expiry, idle/freq, type, key, value) into a buffer, so
//!   a shard can serialize an entry on its own thread (a snapshot's copy-on-write does that before a
//!   write changes a key not yet saved) and hand the bytes to the file's writer.
//! * [`Writer`] writes a whole file: header, aux fields, SELECTDB/RESIZEDB, records, EOF, CRC64.
//! * [`Reader`] reads one back item by item, every encoding Redis 7.0 reads (including the older
//!   ziplist/zipmap/intset/quicklist ones), and names the byte offset of anything wrong.
//! * [`dump`] / [`restore`]: DUMP's payload (value, RDB version, CRC64).
//!
//! Reading never panics and never allocates more than the input can justify: lengths are checked
//! against what is left (or read in bounded steps) before anything is reserved.
//!
//! Modules: [`crc64`] (Redis's checksum), `types` (opcodes and type bytes), `encode` (values to
//! bytes), `decode` (bytes to values, the bounded input), and the packed blobs inside values:
//! [`listpack`], [`ziplist`], [`intset`], [`zipmap`]. docs/rdb-format.md describes what is written
//! and read.

pub mod crc64;
mod decode;
mod encode;
pub mod intset;
pub mod listpack;
mod types;
pub mod ziplist;
pub mod zipmap;

#[cfg(test)]
mod tests;

use decode::{Loaded, Src};
use types::*;

use std::io::{self, Read, Write};

use bytes::Bytes;
use strata_core::{Value, ValueRef};

/// The RDB version written (Redis 7.0). Files of versions 1..=10 are read.
pub const RDB_VERSION: u16 = 10;

/// How records are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// LZF-compress strings longer than 20 bytes where it saves space (`rdbcompression`).
    pub compress: bool,
    /// Write a real CRC64 footer; when false the footer is zero, as Redis writes with
    /// `rdbchecksum no` (and a zero footer is accepted on load).
    pub checksum: bool,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            compress: true,
            checksum: true,
        }
    }
}

/// Access metadata written with a key (Redis writes one of the two by `maxmemory-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    None,
    /// Seconds since last access (RDB_OPCODE_IDLE), under an LRU policy.
    IdleSecs(u64),
    /// The LFU counter (RDB_OPCODE_FREQ), under an LFU policy.
    Freq(u8),
}

/// What is wrong with a file or payload, and where.
#[derive(Debug)]
pub struct Error {
    /// Byte offset in the input at which the problem was found.
    pub offset: u64,
    pub kind: ErrorKind,
}

#[derive(Debug)]
pub enum ErrorKind {
    /// The underlying reader failed.
    Io(io::Error),
    /// The input ended inside a record.
    Truncated,
    /// Not an RDB file, or a version newer than [`RDB_VERSION`].
    BadHeader(String),
    /// The CRC64 footer does not match the content.
    Checksum { expected: u64, computed: u64 },
    /// A value or opcode that is not valid RDB (type, length, encoding, listpack/ziplist
    /// structure, duplicate members...). The text says which.
    Corrupt(String),
    /// Valid RDB that Strata does not store yet (stream, module, function library): the type.
    Unsupported(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ErrorKind::Io(e) => write!(f, "I/O error at offset {}: {e}", self.offset),
            ErrorKind::Truncated => write!(f, "unexpected end of file at offset {}", self.offset),
            ErrorKind::BadHeader(s) => write!(f, "bad RDB header: {s}"),
            ErrorKind::Checksum { expected, computed } => write!(
                f,
                "wrong RDB checksum expected: ({expected:x}) got: ({computed:x})"
            ),
            ErrorKind::Corrupt(s) => write!(f, "corrupt RDB data at offset {}: {s}", self.offset),
            ErrorKind::Unsupported(s) => {
                write!(f, "unsupported RDB content at offset {}: {s}", self.offset)
            }
        }
    }
}

impl std::error::Error for Error {}

/// One key as read from a file.
#[derive(Debug)]
pub struct LoadedKey {
    pub key: Bytes,
    /// Built with the encoding Redis would give it under the current `core::limits` (a listpack
    /// above the limits is converted, as Redis converts on load).
    pub value: Value,
    /// Absolute unix time in ms.
    pub expire_ms: Option<i64>,
    pub access: Access,
}

/// One item of a file, in file order.
#[derive(Debug)]
pub enum Item {
    /// An AUX field (redis-ver, ctime, used-mem, aof-base, repl-id...).
    Aux {
        key: Bytes,
        value: Bytes,
    },
    /// Following keys belong to this database.
    SelectDb(u32),
    /// Size hints for the current database.
    ResizeDb {
        keys: u64,
        expires: u64,
    },
    Key(LoadedKey),
}

/// Appends one key's record to `out`: the expiry opcode if `expire_ms`, the idle/freq opcode of
/// `access`, the type byte, the key, the value.
pub fn encode_key(
    out: &mut Vec<u8>,
    key: &[u8],
    value: ValueRef<'_>,
    expire_ms: Option<i64>,
    access: Access,
    opts: WriteOptions,
) {
    encode::key_record(out, key, value, expire_ms, access, opts)
}

/// Writes a whole RDB file to `W`, computing its CRC64 as it goes. Each call is one `write_all`
/// (a key's whole record at a time): give it a `BufWriter` around a file.
pub struct Writer<W: Write> {
    inner: W,
    opts: WriteOptions,
    written: u64,
    crc: u64,
    /// Reused for aux fields, database headers and keys encoded here.
    scratch: Vec<u8>,
}

impl<W: Write> Writer<W> {
    /// Writes the header (`REDIS0010`).
    pub fn new(inner: W, opts: WriteOptions) -> io::Result<Writer<W>> {
        let mut w = Writer {
            inner,
            opts,
            written: 0,
            crc: 0,
            scratch: Vec::new(),
        };
        w.put(format!("REDIS{RDB_VERSION:04}").as_bytes())?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        if self.opts.checksum {
            self.crc = crc64::crc64(self.crc, bytes);
        }
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn put_scratch(&mut self) -> io::Result<()> {
        let buf = std::mem::take(&mut self.scratch);
        let r = self.put(&buf);
        self.scratch = buf;
        self.scratch.clear();
        r
    }

    /// An AUX field.
    pub fn aux(&mut self, key: &str, value: &[u8]) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.push(OP_AUX);
        encode::put_string(&mut self.scratch, key.as_bytes(), self.opts.compress);
        encode::put_string(&mut self.scratch, value, self.opts.compress);
        self.put_scratch()
    }

    /// SELECTDB then RESIZEDB for database `db`.
    pub fn select_db(&mut self, db: u32, keys: u64, expires: u64) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.push(OP_SELECTDB);
        encode::put_len(&mut self.scratch, u64::from(db));
        self.scratch.push(OP_RESIZEDB);
        encode::put_len(&mut self.scratch, keys);
        encode::put_len(&mut self.scratch, expires);
        self.put_scratch()
    }

    /// Records produced by [`encode_key`], appended as they are.
    pub fn records(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.put(bytes)
    }

    /// One key, encoded here (same as [`encode_key`] then [`Writer::records`]).
    pub fn key(
        &mut self,
        key: &[u8],
        value: ValueRef<'_>,
        expire_ms: Option<i64>,
        access: Access,
    ) -> io::Result<()> {
        self.scratch.clear();
        let mut buf = std::mem::take(&mut self.scratch);
        encode_key(&mut buf, key, value, expire_ms, access, self.opts);
        self.scratch = buf;
        self.put_scratch()
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Writes EOF and the CRC64 footer and hands the writer back (the caller flushes/fsyncs).
    pub fn finish(mut self) -> io::Result<W> {
        self.put(&[OP_EOF])?;
        let crc = if self.opts.checksum { self.crc } else { 0 };
        self.inner.write_all(&crc.to_le_bytes())?;
        self.written += 8;
        Ok(self.inner)
    }
}

/// Reads an RDB file item by item (buffering the input itself: hand it the file as it is).
pub struct Reader<R: Read> {
    /// Buffered here: the decoder reads a byte or a few at a time.
    src: Src<io::BufReader<R>>,
    version: u16,
    done: bool,
    skip_checksum: bool,
    /// Keys of empty collections skipped since the last [`Reader::take_skipped_empty`].
    skipped_empty: Vec<Bytes>,
}

impl<R: Read> Reader<R> {
    /// Reads and checks the header.
    pub fn new(inner: R) -> Result<Reader<R>, Error> {
        let mut src = Src::new(io::BufReader::with_capacity(1 << 16, inner));
        let magic: [u8; 9] = src.array().map_err(|e| match e.kind {
            ErrorKind::Truncated => Error {
                offset: e.offset,
                kind: ErrorKind::BadHeader("shorter than the 9-byte header".into()),
            },
            _ => e,
        })?;
        if &magic[..5] != b"REDIS" {
            return Err(Error {
                offset: 0,
                kind: ErrorKind::BadHeader("wrong signature trying to load DB from file".into()),
            });
        }
        let version = std::str::from_utf8(&magic[5..])
            .ok()
            .filter(|v| v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|v| (1..=RDB_VERSION).contains(v))
            .ok_or_else(|| Error {
                offset: 5,
                kind: ErrorKind::BadHeader(format!(
                    "can't handle RDB format version {}",
                    String::from_utf8_lossy(&magic[5..])
                )),
            })?;
        Ok(Reader {
            src,
            version,
            done: false,
            skip_checksum: false,
            skipped_empty: Vec::new(),
        })
    }

    /// The next item, or None after EOF and a checksum that matched (or was zero).
    pub fn next_item(&mut self) -> Result<Option<Item>, Error> {
        if self.done {
            return Ok(None);
        }
        let src = &mut self.src;
        let mut expire_ms = None;
        let mut access = Access::None;
        loop {
            let op = src.byte()?;
            match op {
                OP_EOF => {
                    self.done = true;
                    if self.version >= 5 {
                        let computed = src.crc;
                        let expected = u64::from_le_bytes(src.array()?);
                        if expected != 0 && expected != computed && !self.skip_checksum {
                            return Err(src.err(ErrorKind::Checksum { expected, computed }));
                        }
                    }
                    return Ok(None);
                }
                OP_SELECTDB => {
                    let db = src.len()?;
                    let db = u32::try_from(db)
                        .map_err(|_| src.corrupt(format!("database number {db}")))?;
                    return Ok(Some(Item::SelectDb(db)));
                }
                OP_RESIZEDB => {
                    let keys = src.len()?;
                    let expires = src.len()?;
                    return Ok(Some(Item::ResizeDb { keys, expires }));
                }
                OP_AUX => {
                    let key = Bytes::from(src.string()?);
                    let value = Bytes::from(src.string()?);
                    return Ok(Some(Item::Aux { key, value }));
                }
                OP_EXPIRETIME => {
                    let secs = i32::from_le_bytes(src.array()?);
                    expire_ms = Some(i64::from(secs) * 1000);
                }
                OP_EXPIRETIME_MS => expire_ms = Some(i64::from_le_bytes(src.array()?)),
                OP_IDLE => access = Access::IdleSecs(src.len()?),
                OP_FREQ => access = Access::Freq(src.byte()?),
                OP_MODULE_AUX => {
                    return Err(src.err(ErrorKind::Unsupported(
                        "module aux data: modules are not supported".into(),
                    )))
                }
                OP_FUNCTION2 | OP_FUNCTION_PRE_GA => {
                    return Err(src.err(ErrorKind::Unsupported(
                        "function library: functions are not stored yet".into(),
                    )))
                }
                t => {
                    let key = Bytes::from(src.string()?);
                    match decode::value(src, t)? {
                        // An empty collection is skipped, as Redis skips it on load.
                        Loaded::Empty => {
                            expire_ms = None;
                            access = Access::None;
                            self.skipped_empty.push(key);
                        }
                        Loaded::Value(value) => {
                            return Ok(Some(Item::Key(LoadedKey {
                                key,
                                value,
                                expire_ms,
                                access,
                            })))
                        }
                    }
                }
            }
        }
    }

    /// The keys of empty collections skipped since the last call (Redis logs each, "rdbLoadObject
    /// skipping empty key: KEY", and loads the rest).
    pub fn take_skipped_empty(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.skipped_empty)
    }

    /// Accepts any footer (DEBUG SET-SKIP-CHECKSUM-VALIDATION 1 applies to loading too).
    pub fn set_skip_checksum(&mut self, skip: bool) {
        self.skip_checksum = skip;
    }

    /// The file's RDB version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.src.offset
    }
}

/// DEBUG SET-SKIP-CHECKSUM-VALIDATION (Redis's `skip_checksum_validation`): process-wide, set by
/// DEBUG, read by RESTORE (and by whoever loads files, through [`Reader::set_skip_checksum`]).
static SKIP_CHECKSUM_VALIDATION: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Applies DEBUG SET-SKIP-CHECKSUM-VALIDATION.
pub fn set_skip_checksum_validation(on: bool) {
    SKIP_CHECKSUM_VALIDATION.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether payloads' and files' checksums go unchecked (DEBUG SET-SKIP-CHECKSUM-VALIDATION 1).
pub fn skip_checksum_validation() -> bool {
    SKIP_CHECKSUM_VALIDATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// Why RESTORE refuses a payload, with Redis's reply text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreError {
    /// "ERR DUMP payload version or checksum are wrong"
    VersionOrChecksum,
    /// "ERR Bad data format"
    BadData,
}

impl RestoreError {
    /// The error reply's text, as Redis words it.
    pub fn message(self) -> &'static str {
        match self {
            RestoreError::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            RestoreError::BadData => "ERR Bad data format",
        }
    }
}

/// DUMP's payload for a value: the value as RDB (type byte + encoding), the RDB version (2 bytes
/// LE), the CRC64 of all that (8 bytes LE).
pub fn dump(value: ValueRef<'_>) -> Vec<u8> {
    let mut out = vec![encode::type_of(value)];
    encode::put_value(&mut out, value, true);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The value of a DUMP payload. `skip_checksum` is DEBUG SET-SKIP-CHECKSUM-VALIDATION.
///
/// As Redis's `verifyDumpPayload` and RESTORE: the footer's version must be at most
/// [`RDB_VERSION`] and its CRC64 must match (unless skipped); then the value is read from the
/// payload's start (the footer's bytes are part of the input, as in Redis). Every structure is
/// checked deeply (Redis does that only under `sanitize-dump-payload yes`); an empty collection
/// is bad data.
pub fn restore(payload: &[u8], skip_checksum: bool) -> Result<Value, RestoreError> {
    restore_explained(payload, skip_checksum).map_err(|(e, _)| e)
}

/// [`restore`], with what is wrong in a payload refused as bad data (the text of the [`Error`],
/// which RESTORE logs at verbose level as Redis logs its corrupt-payload reason).
pub fn restore_explained(
    payload: &[u8],
    skip_checksum: bool,
) -> Result<Value, (RestoreError, Option<String>)> {
    let bad = |e: Error| (RestoreError::BadData, Some(e.to_string()));
    if payload.len() < 10 {
        return Err((RestoreError::VersionOrChecksum, None));
    }
    let footer = &payload[payload.len() - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return Err((RestoreError::VersionOrChecksum, None));
    }
    if !skip_checksum {
        let crc = crc64::crc64(0, &payload[..payload.len() - 8]);
        if crc.to_le_bytes() != footer[2..10] {
            return Err((RestoreError::VersionOrChecksum, None));
        }
    }
    let mut src = Src::new(payload);
    let t = src.byte().map_err(bad)?;
    if !is_object_type(t) {
        return Err((RestoreError::BadData, None));
    }
    match decode::value(&mut src, t) {
        Ok(Loaded::Value(v)) => Ok(v),
        Ok(Loaded::Empty) => Err((RestoreError::BadData, Some("empty key".into()))),
        Err(e) => Err(bad(e)),
    }
}

/// Redis's `rdbIsObjectType`.
fn is_object_type(t: u8) -> bool {
    t <= 7 || (9..=21).contains(&t)
}
