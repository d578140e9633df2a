#!/usr/bin/env python3
"""make_nfc_refs.py — write tests/tokenizer-refs/nfc.json: UTF-8 strings and their Unicode NFC from
Python's unicodedata (an implementation independent of src/text/nfc.c, which its tables come from only
through src/text/gen_unicode_nfc.py), for tests/test_tokenizer.cc.

Cases: every code point whose NFC or NFD differs from itself (outside the 11172 Hangul syllables) as
itself and as its NFD; 200 Hangul syllables in jamo and mixed forms; 1500 deterministic random strings
over starters, combining marks of many classes, jamo, singletons and composition exclusions.

Usage: python3 tests/tokenizer-refs/make_nfc_refs.py > tests/tokenizer-refs/nfc.json
"""
import json
import random
import sys
import unicodedata


def nfc(s):
    return unicodedata.normalize('NFC', s)


def nfd(s):
    return unicodedata.normalize('NFD', s)


def main():
    cases = []
    seen = set()

    def add(s):
        if s not in seen:
            seen.add(s)
            cases.append([s, nfc(s)])

    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000 or 0xAC00 <= cp < 0xAC00 + 11172:
            continue
        c = chr(cp)
        if nfc(c) != c or nfd(c) != c:
            add(c)
            add(nfd(c))
    rnd = random.Random(20260725)
    for _ in range(200):
        s = chr(0xAC00 + rnd.randrange(11172))
        add(nfd(s))
        add(nfd(s)[:2] + 'x')
        add(s + chr(0x11A8 + rnd.randrange(27)))
    pool = ([chr(c) for c in range(0x300, 0x370)] + list('aeiouAEIOUnNcCsSzZqx ') +
            [chr(c) for c in (0x1100, 0x1161, 0x11A8, 0x1112, 0x1175, 0x11C2, 0x05B0, 0x05B9, 0x0591, 0x0F71,
                              0x0F72, 0x0F74, 0x0F80, 0x093C, 0x0915, 0x0958, 0x212B, 0x2126, 0x0344, 0x0340,
                              0x0F73, 0x1E9B, 0x0CC6, 0x0CC2, 0x0CD5, 0x0B47, 0x0B3E, 0x0B57, 0x3099, 0x304B,
                              0x30A6, 0x034F, 0x1D15E, 0x1D165, 0x1D16E, 0x00E9, 0x00C5, 0x01DF, 0xFB2C)])
    for _ in range(1500):
        n = 1 + rnd.randrange(8)
        add(''.join(rnd.choice(pool) for _ in range(n)))
    w = sys.stdout.write
    w('{\n "what": "UTF-8 strings and their Unicode NFC (Python unicodedata); see make_nfc_refs.py",\n')
    w(' "unicode": %s,\n "n_cases": %d,\n "cases": [\n' % (json.dumps(unicodedata.unidata_version), len(cases)))
    w(',\n'.join('  ' + json.dumps(c, ensure_ascii=False) for c in cases))
    w('\n ]\n}\n')


if __name__ == '__main__':
    main()
