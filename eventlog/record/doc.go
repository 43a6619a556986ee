// Package record is the byte format of warren's event logs: one entry per
// line, protected by a CRC, and the group framing of the pending file. It
// encodes entries (Prepare, AppendLine, EncodeLine), decodes and checks
// lines (ParseLine, DecodeLine), and scans a byte stream of lines
// (LineScanner, Scanner), telling a torn tail from corruption. It does no
// file handling: the eventlog package owns the files, the write protocol
// (group commit through the pending file), recovery and healing, and
// reads and writes these bytes through it. Other stores (store/jetstream)
// use EncodeLine and DecodeLine so that every entry they keep is the line
// a file would hold.
//
// # Lines
//
// A log is a file named *.jsonl (agents/<id>/events.jsonl, user.jsonl).
// Each entry is one line, fields in exactly this order:
//
//	{"seq":12,"ts":"2026-11-22T10:01:10.123Z","event":"turn.start","data":{...},"crc":"1a2b3c4d"}\n
//
// where:
//
//   - seq starts at 1 and grows by exactly 1 per line: no gaps, no repeats.
//   - ts is UTC, RFC 3339 with milliseconds.
//   - event is a non-empty UTF-8 string; data is a JSON object (compact, so
//     the line holds no raw newline).
//   - crc is the CRC-32C (Castagnoli) of the line's bytes before `,"crc":`,
//     as 8 lowercase hex digits.
//
// A line counts only if it ends in '\n' and its CRC matches. A line with a
// matching CRC must also be valid UTF-8, a JSON object with seq, ts, event
// and data, and carry the next seq; otherwise it is corruption (it cannot
// come from a torn write). Readers ignore unknown fields. Lines are at most
// MaxLineBytes (64 MiB); Prepare refuses longer records and readers treat a
// longer line as damage without buffering it.
//
// ParseLine checks the framing and the CRC first: a line failing them is
// damage a torn write can leave. A line whose CRC matched is then decoded
// by position when it is in exactly the writer's layout (the path every
// line takes at recovery), and by encoding/json otherwise; both give the
// same entry (FuzzWriterLayout checks it).
//
// # Scanning
//
// Scanner reads a log's lines in order and stops at the first damaged one
// (bad CRC or framing, no newline, over-long). If a line with a valid CRC
// follows the damage, or the damaged line's own CRC matched (wrong content
// or seq), the log is corrupt: a *CorruptError (errors.Is ErrCorrupt)
// naming the file, line, expected seq and offset. Otherwise the damage is
// at the end (Torn): what the eventlog package may cut as a torn tail
// under the rules of its recovery.
//
// # Groups
//
// The pending file of a log (see the eventlog package) holds one group:
// the group's lines, byte for byte as they will appear in the log, then a
// commit trailer
//
//	{"group":<number of lines>,"crc":"<8 hex digits>"}\n
//
// whose CRC-32C covers every byte of the file before `,"crc":` (all the
// lines and the trailer's `{"group":N`). A group without a valid trailer
// (empty, torn, zero-filled, garbage, a valid-looking prefix cut on a line
// boundary) is incomplete: its fsync never returned, so it was never
// written to the log, and ReadGroup reports it discarded whole; this keeps
// a multi-record batch all or none even when a tear ends on a line
// boundary. Bytes after a valid trailer are ignored: they are left over
// from a longer group written before in the same place. A complete group
// whose seqs would leave a gap after the log's last seq is a
// *CorruptError.
package record
