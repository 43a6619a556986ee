package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Reading one line by position: the line a resume point names, and the
// last line before a size a handle knows.

// LineAt returns the complete line (without its newline) starting at off
// of r and the offset just past its newline. It reads a few KiB unless the
// line is longer.
func LineAt(r io.ReaderAt, off int64) ([]byte, int64, error) {
	if off < 0 {
		return nil, 0, fmt.Errorf("negative offset %d", off)
	}
	ls := NewLineScannerSize(r, off, MaxLineBytes, 4<<10)
	kind, line, _, n, err := ls.Next()
	if err != nil {
		return nil, 0, err
	}
	if kind != KindLine {
		return nil, 0, errors.New("no complete line there")
	}
	return line, off + n, nil
}

// CheckLast checks that the bytes of r before size end with the line of
// entry seq (CRC-valid), or that an empty log has seq 0. It reads from the
// end, a few KiB unless the last line is longer.
func CheckLast(r io.ReaderAt, size int64, seq uint64) error {
	if size == 0 {
		if seq != 0 {
			return fmt.Errorf("the file is empty but entry %d was acknowledged", seq)
		}
		return nil
	}
	for chunk := int64(4 << 10); ; chunk *= 8 {
		chunk = min(chunk, size, MaxLineBytes)
		buf := make([]byte, chunk)
		if n, err := r.ReadAt(buf, size-chunk); n != len(buf) {
			return fmt.Errorf("read the last line: %v", err)
		}
		if buf[len(buf)-1] != '\n' {
			return fmt.Errorf("byte %d, the end of entry %d, is not a newline", size-1, seq)
		}
		i := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		if i < 0 && chunk < size && chunk < MaxLineBytes {
			continue
		}
		e, err := ParseLine(buf[i+1 : len(buf)-1])
		if err != nil {
			return fmt.Errorf("the last line is not entry %d: %v", seq, err)
		}
		if e.Seq != seq {
			return fmt.Errorf("the last line is entry %d, not %d", e.Seq, seq)
		}
		return nil
	}
}
