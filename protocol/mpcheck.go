package protocol

import (
	"encoding/binary"
	"fmt"
)

// maxMsgpackDepth bounds nesting in native frames: the msgpack decoder
// recurses per level, so unbounded nesting would exhaust the stack.
const maxMsgpackDepth = 256

// checkMsgpack verifies that b holds exactly one well-formed msgpack value
// that the decoder can turn into plain Go values safely: nesting at most
// maxMsgpackDepth, no container claiming more elements than there are bytes
// left (which would make the decoder preallocate huge maps), no extension
// types and no reserved byte 0xc1. It never allocates per element.
func checkMsgpack(b []byte) error {
	// stack[i] is the number of values still expected at depth i.
	var stackBuf [32]int
	stack := append(stackBuf[:0], 1)
	pos := 0
	for len(stack) > 0 {
		top := len(stack) - 1
		if stack[top] == 0 {
			stack = stack[:top]
			continue
		}
		stack[top]--
		var skip, count int
		var err error
		if pos, skip, count, err = msgpackHead(b, pos); err != nil {
			return err
		}
		if skip > len(b)-pos {
			return fmt.Errorf("msgpack truncated at byte %d", pos)
		}
		pos += skip
		if count > 0 {
			if count > len(b)-pos {
				return fmt.Errorf("msgpack: container at byte %d claims %d values but only %d bytes remain", pos, count, len(b)-pos)
			}
			if len(stack) >= maxMsgpackDepth {
				return fmt.Errorf("msgpack nested deeper than %d levels", maxMsgpackDepth)
			}
			stack = append(stack, count)
		}
	}
	if pos != len(b) {
		return fmt.Errorf("msgpack: %d bytes of trailing data after the value", len(b)-pos)
	}
	return nil
}

// msgpackHead reads the head of the value at b[pos]: its type byte and any
// length field. It returns the position after the head, the payload bytes
// to skip, and the number of child values a container holds.
func msgpackHead(b []byte, pos int) (next, skip, count int, err error) {
	if pos >= len(b) {
		return pos, 0, 0, fmt.Errorf("msgpack truncated at byte %d", pos)
	}
	c := b[pos]
	pos++
	switch {
	case c <= 0x7f || c >= 0xe0: // fixints
		return pos, 0, 0, nil
	case c <= 0x8f: // fixmap
		return pos, 0, 2 * int(c&0x0f), nil
	case c <= 0x9f: // fixarray
		return pos, 0, int(c & 0x0f), nil
	case c <= 0xbf: // fixstr
		return pos, int(c & 0x1f), 0, nil
	}
	if n, ok := msgpackFixedSize(c); ok {
		return pos, n, 0, nil
	}
	width, ok := msgpackLengthWidth(c)
	if !ok {
		if c == 0xc1 {
			return pos, 0, 0, fmt.Errorf("msgpack: reserved byte 0xc1 at byte %d", pos-1)
		}
		// 0xc7-0xc9, 0xd4-0xd8: extension types
		return pos, 0, 0, fmt.Errorf("msgpack: extension type 0x%02x at byte %d is not supported", c, pos-1)
	}
	if len(b)-pos < width {
		return pos, 0, 0, fmt.Errorf("msgpack truncated at byte %d", pos)
	}
	var n uint64
	switch width {
	case 1:
		n = uint64(b[pos])
	case 2:
		n = uint64(binary.BigEndian.Uint16(b[pos:]))
	case 4:
		n = uint64(binary.BigEndian.Uint32(b[pos:]))
	}
	pos += width
	if n > uint64(len(b)) {
		return pos, 0, 0, fmt.Errorf("msgpack: length %d at byte %d exceeds the frame", n, pos-width-1)
	}
	switch c {
	case 0xdc, 0xdd: // array16, array32
		return pos, 0, int(n), nil
	case 0xde, 0xdf: // map16, map32
		return pos, 0, 2 * int(n), nil
	}
	return pos, int(n), 0, nil // bin and str
}

// msgpackFixedSize gives the payload size of the fixed-size types: nil,
// false, true, float32/64, uint8-64, int8-64.
func msgpackFixedSize(c byte) (int, bool) {
	switch c {
	case 0xc0, 0xc2, 0xc3:
		return 0, true
	case 0xcc, 0xd0:
		return 1, true
	case 0xcd, 0xd1:
		return 2, true
	case 0xca, 0xce, 0xd2:
		return 4, true
	case 0xcb, 0xcf, 0xd3:
		return 8, true
	}
	return 0, false
}

// msgpackLengthWidth gives the width of the length field of bin8/16/32,
// str8/16/32, array16/32 and map16/32.
func msgpackLengthWidth(c byte) (int, bool) {
	switch c {
	case 0xc4, 0xd9:
		return 1, true
	case 0xc5, 0xda, 0xdc, 0xde:
		return 2, true
	case 0xc6, 0xdb, 0xdd, 0xdf:
		return 4, true
	}
	return 0, false
}
