#!/usr/bin/env python3
"""Generates pretok_golden.json: reference pre-tokenizer splits computed with
the Python `regex` module (which supports \\p{..} and look-aheads), applying
each rule set's expressions the way llama.cpp does: every expression in turn
cuts every current piece into its leftmost non-overlapping matches plus the
gaps between them. The Go splitters in pretok.go must reproduce these splits.

Run from this directory: python3 gen_pretok.py > pretok_golden.json
"""
import json
import random

import regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN35 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DS_LETTERS = "\U00000041-\U0000005a\U00000061-\U0000007a\U000000b5\U000000c0-\U000000d6\U000000d8-\U000000f6\U000000f8-\U000001ba\U000001bc-\U000001bf\U000001c4-\U00000293\U00000295-\U000002af\U00000370-\U00000373\U00000376\U00000377\U0000037b-\U0000037d\U0000037f\U00000386\U00000388-\U0000038a\U0000038c\U0000038e-\U000003a1\U000003a3-\U000003f5\U000003f7-\U00000481\U0000048a-\U0000052f\U00000531-\U00000556\U000010a0-\U000010c5\U000013a0-\U000013f5\U000013f8-\U000013fd\U00001c90-\U00001cba\U00001cbd-\U00001cbf\U00001d00-\U00001d2b\U00001d6b-\U00001d77\U00001d79-\U00001d9a\U00001e00-\U00001f15\U00001f18-\U00001f1d\U00001f20-\U00001f45\U00001f48-\U00001f4d\U00001f50-\U00001f57\U00001f59\U00001f5b\U00001f5d\U00001f5f-\U00001f7d\U00001f80-\U00001fb4\U00001fb6-\U00001fbc\U00001fbe\U00001fc2-\U00001fc4\U00001fc6-\U00001fcc\U00001fd0-\U00001fd3\U00001fd6-\U00001fdb\U00001fe0-\U00001fec\U00001ff2-\U00001ff4\U00001ff6-\U00001ffc\U00002102\U00002107\U0000210a-\U00002113\U00002115\U00002119-\U0000211d\U00002124\U00002126\U00002128\U0000212a-\U0000212d\U0000212f-\U00002134\U00002139\U0000213c-\U0000213f\U00002145-\U00002149\U0000214e\U00002183\U00002184\U00002c00-\U00002c7b\U00002c7e-\U00002ce4\U00002ceb-\U00002cee\U00002cf2\U00002cf3\U0000a640-\U0000a66d\U0000a680-\U0000a69b\U0000a722-\U0000a76f\U0000a771-\U0000a787\U0000a78b-\U0000a78e\U0000ab70-\U0000abbf\U0000fb00-\U0000fb06\U0000fb13-\U0000fb17\U0000ff21-\U0000ff3a\U0000ff41-\U0000ff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943"

RULES = {
    "gpt-2": [GPT2],
    "llama3": [LLAMA3],
    "qwen2": [QWEN2],
    "qwen35": [QWEN35],
    # Gemma 4 only cuts newline runs from the rest (its BPE runs on whole lines).
    "gemma4": [r"[^\n]+|[\n]+"],
    "starcoder": [r"\p{N}", GPT2],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"],
    # $ is \Z here: Python's $ also matches before a final newline.
    "deepseek-llm": [r"[\r\n]", r"\s?[" + DS_LETTERS + "]+", r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+\Z", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"],
    "deepseek-v3": [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+",
                    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    # llama.cpp's adaptation of Tekken's expression (ASCII-only case classes).
    "tekken": [r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "bloom": [r" ?[^(\s|.,!?…。，、।۔،)]+"],
}


def wtext(s):
    # llama.cpp matches these expressions with std::wregex on a copy of the
    # text where non-ASCII whitespace is replaced by U+000B (so that \s
    # matches it); such characters therefore never fall in an explicit range
    # like [ࠀ-一]. Match on that copy, cut the original.
    return "".join("\x0b" if ord(c) > 0x7F and c.isspace() else c for c in s)


def split(text, exprs):
    pieces = [text] if text else []
    for e in exprs:
        rx = regex.compile(e)
        nxt = []
        for p in pieces:
            pos = 0
            for m in rx.finditer(wtext(p)):
                if m.start() > pos:
                    nxt.append(p[pos:m.start()])
                nxt.append(p[m.start():m.end()])
                pos = m.end()
            if pos < len(p):
                nxt.append(p[pos:])
        pieces = nxt
    return pieces


FIXED = [
    "", " ", "  ", "\n", "\r\n", " \n", "\n \n", "  \n\n  x", "\t\ta", "a\t\t", "Hello world",
    " Hello  World   ", "I'M WE'LL you'RE it's THEY'D 'S", "don't 'tis o'clock", "''''",
    "12345678", "1 22 333 4444 55555", "x1234y", "3.14159", "١٢٣٤٥ ²³", "Ⅻ ⅻ",
    "!!!\n\n", "?!.\r\n\r\nabc", "(hello) [world] {x}", "$100 + 5 = <105>", "a^b~c|d`e",
    "a\u00a0b\u3000c\u2028d", "naïve café", "e\u0301\u0301x", "日本語のテキスト", "한국어 텍스트",
    "Привет, мир!", "مرحبا بالعالم", "😀😀 emoji👍🏽", "   \t\n  mixed   \r\n end  ",
    "ǅungla ǈ", "µ ſ K", "ab...cd,,,ef", "x!!!y", " !x", "\u0085a\u0085", "  ",
    "what's up?\nI'm fine!!\n\n\nOK.", "def f(x):\n    return x**2  # square\n",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ ！？", "‘quotes’ “double”", "tab\there", "\x00\x01\x7f",
    "ひらがなカタカナ漢字 mixed", "!important .class #id", "e\u0301 \u0301x x\u0301", "a+b=c; x->y", "1,234,567.89",
    "HTTPServer getHTTPResponse XMLHttpRequest ÉCOLE École ÀÉa aÀÉ", "CamelCaseWord ABCdef ABC abc", "path/to/file\n/x",
]

ALPHABET = list("aZé ßΩж日가1٣²!?.,'\"$+<>`~|-_\t\n\r") + ["\u00a0", "\u3000", "😀", "\u0301", "'s", "'LL", "  ", "\r\n", "123", "ǅ", "µ", "Ⅻ", "！", "。", "’", "ひ", "カ", "@", "#", "A", "É", "é", "ABC", "/"]


def main():
    rnd = random.Random(20261130)
    texts = list(FIXED)
    for _ in range(400):
        n = rnd.randint(1, 24)
        texts.append("".join(rnd.choice(ALPHABET) for _ in range(n)))
    out = []
    for t in texts:
        out.append({"text": t, "splits": {name: split(t, ex) for name, ex in RULES.items()}})
    # One case per line.
    print("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in out) + "\n]")


if __name__ == "__main__":
    main()
