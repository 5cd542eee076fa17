"""The keyword index (BM25) kept beside the vectors: its words, its answers, its upkeep."""

from __future__ import annotations

import pickle
import random

from rdfmem.store.indexes.keywords import KeywordSet, tokenize


def test_words_fold_case_accents_punctuation_and_split_numbers() -> None:
    assert tokenize("Café SOCIAL-media v2.0, 3pm!") == [
        "cafe",
        "social",
        "media",
        "v",
        "2",
        "0",
        "3",
        "pm",
    ]
    assert tokenize("Grüße aus Köln") == ["grusse", "aus", "koln"]
    assert tokenize("東京 タワー") == ["東京", "タワー"]  # other scripts keep their words
    assert tokenize("deploys deployed deploying") == ["deploy"] * 3
    assert tokenize("the and of") == []  # common words say nothing


def test_the_text_sharing_the_rare_word_ranks_first() -> None:
    ks = KeywordSet(("urn:g",), "t")
    ks.put("urn:g", "urn:a", "Caroline went to the LGBTQ support group on Sunday")
    ks.put("urn:g", "urn:b", "Caroline painted a sunrise with her kids")
    ks.put("urn:g", "urn:c", "Melanie ran a charity race")
    found = [s for _, s, _ in ks.search("When did Caroline go to the support group?", 3)]
    assert found[0] == "urn:a"
    assert "urn:c" not in found  # shares no word with the question


def test_put_replaces_and_remove_forgets() -> None:
    ks = KeywordSet(("urn:g",), "t")
    ks.put("urn:g", "urn:a", "green tea")
    ks.put("urn:g", "urn:a", "black coffee")
    assert ks.search("tea", 5) == []
    assert [s for _, s, _ in ks.search("coffee", 5)] == ["urn:a"]
    assert ks.remove("urn:g", "urn:a") and not ks.remove("urn:g", "urn:a")
    assert ks.search("coffee", 5) == [] and len(ks) == 0


def test_an_index_kept_by_many_writes_answers_as_one_built_at_once() -> None:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(60)]
    kept = KeywordSet(("urn:g",), "t")
    final: dict[str, str] = {}
    for _ in range(5_000):  # puts, replacements and removals: slots reused, postings purged
        subject = f"urn:s{rng.randrange(1_500)}"
        if rng.random() < 0.3:
            kept.remove("urn:g", subject)
            final.pop(subject, None)
        else:
            text = " ".join(rng.choices(words, k=rng.randrange(1, 12)))
            kept.put("urn:g", subject, text)
            final[subject] = text
    fresh = KeywordSet(("urn:g",), "t")
    fresh.rebuild(("urn:g", s, t) for s, t in final.items())
    assert len(kept) == len(fresh) == len(final)
    for query in ("w1 w2", "w7", "w59 w3 w3", "nothing"):
        a, b = kept.search(query, 20), fresh.search(query, 20)
        assert [s for _, s, _ in a] == [s for _, s, _ in b]
        assert [round(x, 4) for _, _, x in a] == [round(x, 4) for _, _, x in b]


def test_a_rebuild_leaves_the_index_that_puts_one_by_one_leave() -> None:
    rng = random.Random(9)
    words = [f"w{i}" for i in range(80)] + ["the", "Tea", "café", "x2y"]
    entries = [
        (
            "urn:g",
            f"urn:s{rng.randrange(900)}",
            " ".join(rng.choices(words, k=rng.randrange(0, 15))),
        )
        for _ in range(1_500)
    ]  # keys given more than once: the later text wins
    built, put = KeywordSet(("urn:g",), "t"), KeywordSet(("urn:g",), "t")
    built.put("urn:g", "urn:old", "gone after the rebuild")
    built.rebuild(entries)
    for graph, subject, text in entries:
        put.put(graph, subject, text)

    def same() -> None:
        assert len(built) == len(put)
        assert ("urn:g", "urn:old") not in built
        for query in ("w1 w2", "w7 tea", "cafe", "x2y w79", "gone", "nothing"):
            assert built.search(query, 30) == put.search(query, 30)

    same()
    built = pickle.loads(pickle.dumps(built, protocol=5))  # saved beside a store, taken back
    same()
    # And it goes on as the other does: replacements, removals, new texts.
    for n in range(400):
        subject = f"urn:s{rng.randrange(1_000)}"
        if n % 3 == 0:
            assert built.remove("urn:g", subject) == put.remove("urn:g", subject)
        else:
            text = " ".join(rng.choices(words, k=rng.randrange(1, 10)))
            built.put("urn:g", subject, text)
            put.put("urn:g", subject, text)
    same()
