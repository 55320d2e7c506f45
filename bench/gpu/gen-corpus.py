#!/usr/bin/env python3
"""Writes a deterministic English-like text corpus for the char-GPT GPU benchmark
(bench/gpu/char-gpt.purple and bench/gpu/char-gpt.py), for machines without Debian's fortunes.

usage: python3 bench/gpu/gen-corpus.py OUT-FILE [SIZE-BYTES]     (default 1,000,000 bytes)

Standard library only; the text depends on nothing but SIZE-BYTES (its own 64-bit linear
congruential generator, not Python's random module), so every machine writes the same bytes. The
sentences come from a small grammar with agreement, punctuation, quotes and line breaks: enough
structure for a character model's loss to fall well below the unigram entropy in a few hundred
steps, and a vocabulary of about 60 distinct bytes, close to the fortunes corpus."""
import sys

SUBJECTS = ("the cat", "a dog", "my neighbour", "the old sailor", "every programmer", "the committee",
            "a small robot", "the king", "your mother", "the compiler", "a tired student", "the wizard",
            "nobody", "the weather", "a stranger", "the machine", "our teacher", "the river")
VERBS = ("likes", "finds", "remembers", "forgets", "watches", "builds", "breaks", "answers", "follows",
         "carries", "writes", "reads", "sells", "borrows", "hides", "explains", "questions", "paints")
OBJECTS = ("the door", "a letter", "some bread", "the answer", "an old map", "the garden", "a green apple",
           "the last train", "a broken clock", "the little book", "every rule", "a quiet song", "the key",
           "the problem", "a long story", "the moon", "fresh coffee", "the network")
ADVERBS = ("slowly", "quietly", "again", "at night", "on sunday", "without a word", "in the morning",
           "for no reason", "with great care", "every day", "before dinner", "in secret")
CONNECT = ("and then", "but", "because", "so", "while", "although", "until")
SAYINGS = ("Time is a teacher.", "Never trust a clock.", "Bread first, then books.",
           "A bug is a feature nobody asked for.", "Patience opens every door.",
           "The river does not argue.", "Small steps, long roads.", "Keep your keys and your secrets.")


class Lcg:
    """Knuth's MMIX constants; the high bits pick from a list."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return (self.state >> 33) % n

    def pick(self, items):
        return items[self.below(len(items))]


def clause(r):
    words = [r.pick(SUBJECTS), r.pick(VERBS), r.pick(OBJECTS)]
    if r.below(3) == 0:
        words.append(r.pick(ADVERBS))
    return " ".join(words)


def sentence(r):
    kind = r.below(10)
    if kind < 6:
        s = clause(r)
        if r.below(2):
            s += " " + r.pick(CONNECT) + " " + clause(r)
        return s[0].upper() + s[1:] + "."
    if kind < 8:
        return "Is it true that " + clause(r) + "?"
    if kind == 8:
        return '"' + r.pick(SAYINGS) + '" said ' + r.pick(SUBJECTS) + "."
    return r.pick(SAYINGS)


def corpus(size):
    r = Lcg(20261125)
    out, n = [], 0
    while n < size:
        para = []
        width = 0
        for _ in range(2 + r.below(5)):
            s = sentence(r)
            for word in s.split(" "):
                if width + len(word) + 1 > 72:
                    para.append("\n")
                    width = 0
                elif width:
                    para.append(" ")
                    width += 1
                para.append(word)
                width += len(word)
        para.append("\n%\n")        # the fortune files' separator
        text = "".join(para)
        out.append(text)
        n += len(text)
    return "".join(out)[:size]


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    if sys.argv[1].startswith("-"):
        sys.exit("gen-corpus.py: unknown option %s (the first argument is the file to write)\n%s" % (sys.argv[1], __doc__))
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    with open(sys.argv[1], "w", encoding="ascii", newline="\n") as f:
        f.write(corpus(size))


if __name__ == "__main__":
    main()
