package netguard

import (
	"encoding/binary"
	"net/netip"
)

// insn is one eBPF instruction (struct bpf_insn).
type insn struct {
	code uint8
	regs uint8 // dst in the low nibble, src in the high one
	off  int16
	imm  int32
}

// Instruction classes and codes used here.
const (
	classLDX   = 0x01
	classJMP   = 0x05
	classJMP32 = 0x06
	classALU64 = 0x07
	sizeW      = 0x00
	modeMEM    = 0x60
	opMOV      = 0xb0
	opJEQ      = 0x10
	opJNE      = 0x50
	opJA       = 0x00
	opEXIT     = 0x90
	srcK       = 0x00
)

// Offsets in struct bpf_sock_addr.
const (
	offUserIP4 = 4
	offUserIP6 = 8
)

func ldxW(dst, src uint8, off int16) insn {
	return insn{code: classLDX | sizeW | modeMEM, regs: dst | src<<4, off: off}
}
func movImm(dst uint8, v int32) insn { return insn{code: classALU64 | opMOV | srcK, regs: dst, imm: v} }
func jmp32Imm(op, dst uint8, v uint32, off int16) insn {
	return insn{code: classJMP32 | op | srcK, regs: dst, off: off, imm: int32(v)}
}
func ja(off int16) insn { return insn{code: classJMP | opJA, off: off} }
func exit() insn        { return insn{code: classJMP | opEXIT} }

// word is the value a little-endian 32-bit load reads from b, which holds
// an address in network order (the kernel keeps user_ip4/user_ip6 so).
func word(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// verdict ends a program: allow (1) falls through, deny (0) is jumped to.
func verdict() []insn {
	return []insn{movImm(0, 1), exit(), movImm(0, 0), exit()}
}

// program4 denies the IPv4 addresses in deny: r2 = user_ip4, one compare
// each, a match jumps to the deny verdict.
func program4(deny []netip.Addr) []insn {
	p := []insn{ldxW(2, 1, offUserIP4)}
	for i, a := range deny {
		b := a.As4()
		toDeny := int16(len(deny)-1-i) + 2 // past the remaining compares and "allow"
		p = append(p, jmp32Imm(opJEQ, 2, word(b[:]), toDeny))
	}
	return append(p, verdict()...)
}

// program6 denies the IPv6 addresses in deny: r2..r5 = user_ip6, four
// compares each (any mismatch goes to the next address), then a jump to
// the deny verdict.
func program6(deny []netip.Addr) []insn {
	p := []insn{ldxW(2, 1, offUserIP6), ldxW(3, 1, offUserIP6+4), ldxW(4, 1, offUserIP6+8), ldxW(5, 1, offUserIP6+12)}
	const per = 5 // four compares and a jump
	for i, a := range deny {
		b := a.As16()
		for w := 0; w < 4; w++ {
			next := int16(per - 1 - w) // to the next address's first compare
			p = append(p, jmp32Imm(opJNE, uint8(2+w), word(b[4*w:4*w+4]), next))
		}
		toDeny := int16((len(deny)-1-i)*per) + 2
		p = append(p, ja(toDeny))
	}
	return append(p, verdict()...)
}

// encode lays the program out as the kernel reads it.
func encode(p []insn) []byte {
	out := make([]byte, 0, 8*len(p))
	for _, in := range p {
		out = append(out, in.code, in.regs)
		out = binary.LittleEndian.AppendUint16(out, uint16(in.off))
		out = binary.LittleEndian.AppendUint32(out, uint32(in.imm))
	}
	return out
}

// split sorts deny into the programs' lists: IPv4 addresses for the IPv4
// hooks, and every address for the IPv6 ones (an IPv4 one as IPv4-mapped,
// the form a dual-stack socket connects with).
func split(deny []netip.Addr) (v4, v6 []netip.Addr) {
	for _, a := range deny {
		a = a.Unmap()
		if a.Is4() {
			v4 = append(v4, a)
			v6 = append(v6, netip.AddrFrom16(a.As16()))
			continue
		}
		v6 = append(v6, a)
	}
	return v4, v6
}
