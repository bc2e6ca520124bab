"""Instructions: deterministic ones from signatures and docstrings, and DomainEval's prompt
sent to a real OpenAI-compatible server on loopback, with replies cached."""

from __future__ import annotations

from pathlib import Path

from knowbench.benchmark.schema import FunctionTask, TestSpec
from knowbench.builders.instructions import docstring_instruction, llm_instructions, parse_docstring
from knowbench.models.cache import GenerationCache
from knowbench.models.openai import OpenAIBackend
from openai_server import ScriptedOpenAIServer, last_user_message

SPHINX = '''
def encrypt(message: bytes, pub_key, *, padding: str = "pkcs1") -> bytes:
    """Encrypts the given message using PKCS#1 v1.5.

    >>> encrypt(b'hello', key)
    b'...'

    :param message: the message to encrypt.
    :param pub_key: the key to encrypt with.
    :type pub_key: PublicKey
    :return: the encrypted message, as bytes.
    :raises OverflowError: when the message is too large.
    """
    return pub_key.encrypt(message)
'''

GOOGLE = '''
def clamp(value, low=0, high=100):
    """Limit a value to a range.

    Args:
        value (int): The number to limit.
        low: Lower bound,
            inclusive.

    Returns:
        int: the limited value.
    """
    return max(low, min(value, high))
'''


def _task(reference: str, entry_point: str) -> FunctionTask:
    name = entry_point.split(".")[-1]
    return FunctionTask(task_id=f"t/{name}", domain="d", instruction="x", prompt_code=f"def {name}():\n    ...",
                        entry_point=name, reference=reference.strip(), tests=[TestSpec(name="t", code="pass")])


def test_sphinx_docstring_becomes_functionality_inputs_outputs() -> None:
    text = docstring_instruction(_task(SPHINX, "encrypt"), module="rsa.pkcs1", library="rsa 4.9")
    assert text.startswith("Functionality: Implement the function `encrypt` in module `rsa.pkcs1` (rsa 4.9). "
                           "Encrypts the given message using PKCS#1 v1.5.")
    assert "- `message` (bytes): the message to encrypt." in text
    assert "- `pub_key` (PublicKey): the key to encrypt with." in text
    assert "- `padding` (str; default 'pkcs1')" in text
    assert "- returns `bytes`: the encrypted message, as bytes." in text
    assert "- raises OverflowError: when the message is too large." in text
    assert ">>>" not in text and "b'hello'" not in text  # doctest examples stay out


def test_google_sections_are_understood() -> None:
    doc = parse_docstring(GOOGLE.split('"""')[1])
    assert doc.summary == "Limit a value to a range."
    assert doc.params == {"value": "The number to limit.", "low": "Lower bound, inclusive."}
    assert doc.types == {"value": "int"}
    assert doc.returns == "int: the limited value."


def test_without_a_docstring_the_instruction_says_so() -> None:
    text = docstring_instruction(_task("def f(a, b):\n    return a + b", "f"))
    assert "No documentation was available" in text
    assert "- `a`\n- `b`" in text


def test_llm_instructions_use_domaineval_prompt_and_are_cached(tmp_path: Path) -> None:
    reply = "```\nFunctionality: Limits a value.\nInputs: value, low, high.\nOutputs: the limited value.\n```"
    task = _task(GOOGLE, "clamp")
    with ScriptedOpenAIServer(responder=lambda body: reply if "clamp" in last_user_message(body) else "no") as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url,
                                cache=GenerationCache(tmp_path / "cache.sqlite"))
        assert llm_instructions(backend, [task]) == [
            "Functionality: Limits a value.\nInputs: value, low, high.\nOutputs: the limited value."]
        system = server.requests[0].body["messages"][0]["content"]
        assert "interviewees are going to complete the clamp function" in system
        assert "Do not reveal test cases" in system
        again = OpenAIBackend(model="scripted", base_url=server.base_url,
                              cache=GenerationCache(tmp_path / "cache.sqlite"))
        llm_instructions(again, [task])
        assert len(server.requests) == 1  # the second build asked nothing


def test_a_reply_without_the_sections_is_refused(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder=lambda body: "Sure! This function clamps.") as server:
        backend = OpenAIBackend(model="scripted", base_url=server.base_url)
        assert llm_instructions(backend, [_task(GOOGLE, "clamp")]) == [None]
