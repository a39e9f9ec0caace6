"""Synthetic prompt text: common English words, about one token each on the usual tokenizers,
so N words is "about N tokens" for a prompt, a trace's block or a conversation's turn."""

from __future__ import annotations

import random

# Common English words that most LLM tokenizers (Llama 3, Qwen, Mistral) keep as one token each
# when preceded by a space, so N words is "about N tokens" for a synthetic prompt.
_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their has been if more when will would "
    "who so no out up into do than can some time could them other new only these two may first "
    "then any like my now over such our man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people how "
    "too little state good very make world still own see men work long get here between both "
    "life being under never day same another know while last might us great old year off come "
    "since against go came right used take three small large next early young important few "
    "public bad same able city water room food music story money light house car road river"
).split()


def synthetic_words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(max(0, n)))
