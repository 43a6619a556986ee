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
		if pos >= len(b) {
			return fmt.Errorf("msgpack truncated at byte %d", pos)
		}
		c := b[pos]
		pos++
		var skip, count int // bytes of payload to skip; children to read
		switch {
		case c <= 0x7f || c >= 0xe0: // fixints
		case c <= 0x8f:
			count = 2 * int(c&0x0f)
		case c <= 0x9f:
			count = int(c & 0x0f)
		case c <= 0xbf:
			skip = int(c & 0x1f)
		default:
			var n uint64
			var width int
			switch c {
			case 0xc0, 0xc2, 0xc3:
			case 0xc1:
				return fmt.Errorf("msgpack: reserved byte 0xc1 at byte %d", pos-1)
			case 0xc4, 0xd9: // bin8, str8
				width = 1
			case 0xc5, 0xda:
				width = 2
			case 0xc6, 0xdb:
				width = 4
			case 0xca:
				skip = 4
			case 0xcb:
				skip = 8
			case 0xcc, 0xd0:
				skip = 1
			case 0xcd, 0xd1:
				skip = 2
			case 0xce, 0xd2:
				skip = 4
			case 0xcf, 0xd3:
				skip = 8
			case 0xdc:
				width = 2
			case 0xdd:
				width = 4
			case 0xde:
				width = 2
			case 0xdf:
				width = 4
			default: // 0xc7-0xc9, 0xd4-0xd8: extension types
				return fmt.Errorf("msgpack: extension type 0x%02x at byte %d is not supported", c, pos-1)
			}
			if width > 0 {
				if len(b)-pos < width {
					return fmt.Errorf("msgpack truncated at byte %d", pos)
				}
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
					return fmt.Errorf("msgpack: length %d at byte %d exceeds the frame", n, pos-width-1)
				}
				switch c {
				case 0xdc, 0xdd:
					count = int(n)
				case 0xde, 0xdf:
					count = 2 * int(n)
				default:
					skip = int(n)
				}
			}
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
