"""The code-aware tokenizer used by BM25."""

from __future__ import annotations

from knowbench.knowledge.tokenizer import split_identifier, tokenize, tokenize_to_ids


def test_snake_case_is_split_and_kept_whole() -> None:
    assert split_identifier("get_user_name") == ["get_user_name", "get", "user", "name"]


def test_camel_case_and_acronyms_are_split() -> None:
    assert split_identifier("XMLHttpRequest") == ["xmlhttprequest", "xml", "http", "request"]
    assert split_identifier("parseJSON") == ["parsejson", "parse", "json"]


def test_dotted_names_keep_the_whole_path_and_every_part() -> None:
    assert split_identifier("click.core.Command") == [
        "click.core.command", "core.command", "click", "core", "command"]
    assert tokenize("os.path.join(a, b)") == ["os.path.join", "path.join", "os", "path", "join"]


def test_everything_is_lower_case() -> None:
    assert all(token == token.lower() for token in tokenize("HTTPServer.ServeForever FooBar"))


def test_python_keywords_self_and_single_letters_are_dropped() -> None:
    tokens = tokenize("def f(self, x):\n    return None if x is not None else True")
    assert tokens == []
    assert tokenize("for item in items: yield item") == ["item", "items", "item"]


def test_repeats_are_kept_for_term_frequency_and_numbers_of_two_digits_or_more() -> None:
    assert tokenize("retry retry 404 7") == ["retry", "retry", "404"]


def test_private_and_dunder_names_keep_their_underscores_whole() -> None:
    assert split_identifier("__init__") == ["__init__", "init"]
    assert split_identifier("_make_key") == ["_make_key", "make", "key"]


def test_corpus_tokenization_to_ids_matches_tokenize() -> None:
    texts = ["def parse_args(argv): return ArgParser(argv)", "", "ArgParser.parse_args 404",
             "class ArgParser:\n    pass"]
    documents, vocab = tokenize_to_ids(texts)
    names = {token_id: token for token, token_id in vocab.items()}
    assert [[names[i] for i in ids] for ids in documents] == [tokenize(text) for text in texts]
    assert sorted(vocab.values()) == list(range(len(vocab)))
