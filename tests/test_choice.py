"""Tests for knowbench.choice: option letters from multiple-choice replies."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from knowbench.choice import parse_choice
from koco_replies import koco_replies

FOUR = "ABCD"
SIX = "ABCDEF"


def single(reply: str, letters: str = FOUR) -> list[str]:
    return parse_choice(reply, list(letters), multiple=False)


def several(reply: str, letters: str = SIX) -> list[str]:
    return parse_choice(reply, list(letters), multiple=True)


# ------------------------------------------------------------------- formats


def test_boxed_letter() -> None:
    assert single("Reasoning...\n\n\\boxed{A}") == ["A"]


def test_boxed_text_letter_reads_only_the_letter() -> None:
    assert single("\\boxed{\\text{A}}") == ["A"]
    assert several("$\\boxed{\\text{A, C}}$", letters="ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ["A", "C"]


def test_boxed_several_letters() -> None:
    assert several("\\boxed{A, C}") == ["A", "C"]
    assert several("\\boxed{C,A,C}") == ["A", "C"]


def test_boxed_textbf_parenthesised_letter() -> None:
    assert single("$\\boxed{\\textbf{(B)}}$") == ["B"]


def test_answer_colon() -> None:
    assert single("Answer: B") == ["B"]


def test_bold_answer_label() -> None:
    assert single("**Answer:** C") == ["C"]
    assert single("**Final Answer**: D") == ["D"]


def test_answer_is_parenthesised() -> None:
    assert single("After some thought, the answer is (C).") == ["C"]


def test_bold_letter() -> None:
    assert single("**D**") == ["D"]


def test_correct_options_are_several() -> None:
    assert several("The correct options are A and C") == ["A", "C"]


def test_marker_region_stops_at_end_of_clause() -> None:
    reply = "The correct answers are A, B, and D, while E is not valid and F is wrong."
    assert several(reply) == ["A", "B", "D"]


def test_parenthesised_letter_alone() -> None:
    assert single("(A)") == ["A"]


def test_lone_letter_line() -> None:
    assert single("Let me think about it.\n\nC\n") == ["C"]


def test_lone_letter_line_with_markdown() -> None:
    assert single("## Conclusion\n\n> **B**\n\nThat is my pick.") == ["B"]


def test_lone_letters_list_line() -> None:
    assert several("After weighing each one:\nA, B, D") == ["A", "B", "D"]


def test_article_a_is_not_a_letter() -> None:
    assert single("A good choice is B") == ["B"]


def test_letter_a_before_verb_is_a_letter() -> None:
    assert single("A is correct") == ["A"]
    assert several("A and C") == ["A", "C"]


def test_pronoun_i_is_not_a_letter() -> None:
    assert single("I think the best is B", letters="ABCDEFGHIJ") == ["B"]
    assert single("I'm sure: C", letters="ABCDEFGHIJ") == ["C"]


def test_letters_inside_words_and_identifiers_are_ignored() -> None:
    reply = "The T_BS matrix, an X-ray, np.T and GPU are all irrelevant. Answer: E"
    assert parse_choice(reply, list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), multiple=True) == ["E"]


def test_last_explicit_marker_wins() -> None:
    reply = "Answer: B. On reflection, the final answer is D."
    assert single(reply) == ["D"]


def test_boxed_after_final_answer_heading() -> None:
    assert several("**Final Answer:**\n\\boxed{A,B,D}") == ["A", "B", "D"]


def test_marker_at_end_of_line_reads_next_line() -> None:
    assert several("Therefore, the correct options are:\n\n- (A), (C)") == ["A", "C"]


def test_single_mode_returns_last_letter_of_answer() -> None:
    assert single("\\boxed{A, C}") == ["C"]


def test_only_offered_letters_are_returned() -> None:
    assert single("Answer: F") == []
    assert several("\\boxed{A, G, C}") == ["A", "C"]


def test_result_is_sorted_and_unique() -> None:
    assert several("Answer: E, B, E, A") == ["A", "B", "E"]


def test_option_is_correct_sentence() -> None:
    assert single("Looking at the code, option C is correct.") == ["C"]


def test_reply_opening_with_labelled_letter() -> None:
    assert single("B. Because the cache is flushed first.") == ["B"]


def test_analysis_headers_are_not_answers() -> None:
    reply = "1. **Analyze Option (A):** plausible.\n2. **(B) Uses a cache:** This is"
    assert several(reply) == []


def test_empty_and_letterless_replies_give_nothing() -> None:
    assert single("") == []
    assert several("None of these options apply.") == []


# ----------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def koco_rows(shared_data: Callable[..., Path]) -> list[dict[str, Any]]:
    """KOCO results joined to their problems by (framework, id), with options and mode."""
    return koco_replies(shared_data("anchors/koco-qa"))


def _ours(row: dict[str, Any], reply: str | None = None) -> list[str]:
    return parse_choice(row["pred_raw"] if reply is None else reply, row["options"], row["multiple"])


def _as_boxed_text(reply: str) -> str:
    """The reply with its last \\boxed{...} rewritten as \\boxed{\\text{...}}."""
    start = reply.rindex("\\boxed{") + len("\\boxed{")
    end = reply.index("}", start)
    return reply[:start] + "\\text{" + reply[start:end].replace(",", ", ") + "}" + reply[end:]


def test_koco_our_letters_are_always_among_the_options(koco_rows: list[dict[str, Any]]) -> None:
    for row in koco_rows:
        ours = _ours(row)
        assert set(ours) <= set(row["options"]), (row["model"], row["id"], ours)
        assert row["multiple"] or len(ours) <= 1


def test_koco_agreement_and_their_parser_mistakes(koco_rows: list[dict[str, Any]]) -> None:
    rows = koco_rows
    boxed = [row for row in rows if "\\boxed{" in row["pred_raw"]]
    unboxed = [row for row in rows if "\\boxed{" not in row["pred_raw"]]
    out_of_options = [row for row in rows if not set(row["pred_letters"]) <= set(row["options"])]
    differ = [row for row in rows if _ours(row) != sorted(row["pred_letters"])]
    print(f"\nKOCO rows: {len(rows)}, boxed: {len(boxed)}, cut off without an answer: {len(unboxed)}")
    print(f"KOCO letters outside the options: {len(out_of_options)}; ours differ: {len(differ)}")
    for row in differ[:5]:
        print(f"  {row['model']} #{row['id']}: KOCO {row['pred_letters']}, ours {_ours(row)}, "
              f"gt {row['gt_letters']}, ends {row['pred_raw'][-60:]!r}")
    assert all(_ours(row) == sorted(row["pred_letters"]) for row in boxed)
    assert {id(row) for row in out_of_options} <= {id(row) for row in unboxed}
    assert {id(row) for row in differ} <= {id(row) for row in unboxed}
    assert not any(row["is_correct"] for row in unboxed)
    assert not any(_ours(row) == sorted(row["gt_letters"]) for row in unboxed)


def test_koco_unanswered_replies_give_no_letters(koco_rows: list[dict[str, Any]]) -> None:
    """Every released reply without a box is cut off before it answers (see
    tests/fixtures/koco_choice_verdicts.jsonl): none may yield a letter."""
    unboxed = [row for row in koco_rows if "\\boxed{" not in row["pred_raw"]]
    assert unboxed
    assert Counter(bool(_ours(row)) for row in unboxed) == Counter({False: len(unboxed)})


def test_koco_boxed_text_answers_parse_like_plain_boxed(koco_rows: list[dict[str, Any]]) -> None:
    """No released reply uses \\boxed{\\text{...}} (the form KOCO misreads as T,E,X,...),
    so rewrite every boxed answer into that form: our letters must not change, and on
    the rows the model got right they must equal the gold letters."""
    boxed = [row for row in koco_rows if "\\boxed{" in row["pred_raw"]]
    assert not any("\\boxed{\\text{" in row["pred_raw"] for row in boxed)
    for row in boxed:
        rewritten = _as_boxed_text(row["pred_raw"])
        assert "\\boxed{\\text{" in rewritten
        assert _ours(row, rewritten) == _ours(row)
        if row["is_correct"]:
            assert _ours(row, rewritten) == sorted(row["gt_letters"])


# ------------------------------------------------- unanswered, run-on, echoed


def test_cut_off_reasoning_gives_no_letters() -> None:
    cut = ("1. **Analyze Option (A):** This is a fundamental component. Therefore, this statement "
           "is correct.\n\n2. **Analyze Option (B):** A common approach (like data shape, as "
           "mentioned in E) is to remove the distortion from")
    assert several(cut) == []
    assert several("*   **Step 2: Analyze Option (B).** The flag is for correctness, and (C) is "
                   "about memory. A policy trained in IsaacLab expects the") == []
    assert single("The frame (B) is distinct from the sensor frame (S), and A transform") == []


def test_cut_off_after_an_intermediate_verdict_gives_no_letters() -> None:
    reply = ("Let me go through each option.\n\n1. (A) is correct: it bridges dispatch.\n"
             "2. (B) is correct as well.\n3. (C) Using the allocator reuses memory, hence")
    assert several(reply) == []


def test_unclosed_think_block_is_unanswered() -> None:
    reply = "<think>\nOption A looks right. The answer is likely A, B. But let me check again"
    assert several(reply) == []
    assert several("<think>\nThe answer is A.\n</think>\n\nFinal answer: \\boxed{B, C}") == ["B", "C"]


def test_answer_then_invented_follow_up_keeps_the_first_answer() -> None:
    assert single("Reasoning.\n\\boxed{B}\n\nHuman: next question? ...\n\\boxed{C}") == ["B"]
    assert single("So the answer is \\boxed{A}.\nUser: and this one?\nAnswer: D") == ["A"]
    assert single("Answer: B<|im_start|>user\nWhy?<|im_end|>\nAnswer: C") == ["B"]
    follow_up = ("The final answer is \\boxed{A,B}.\n\nInstruction: choose MULTIPLE options\n\n"
                 "Which of the following are true?\n\n- (A) one\n- (B) two\n- (C) three\n\n"
                 "Therefore, the final answer is \\boxed{C}.")
    assert several(follow_up) == ["A", "B"]
    stem = ("Answer: C\n\n### Question 2\nWhich cache is used?\n- (A) L1\n- (B) L2\n\nAnswer: A")
    assert single(stem) == ["C"]
    new_stem = "\\boxed{D}\n\nWhat does the scheduler do?\n\n- (A) x\n- (B) y\n\n\\boxed{A}"
    assert single(new_stem) == ["D"]


def test_run_on_markers_before_any_answer_are_kept() -> None:
    reply = "Question: which one?\n- (A) x\n- (B) y\n\nReasoning...\n\nAnswer: B"
    assert single(reply) == ["B"]


def test_echoed_answer_form_is_not_an_answer() -> None:
    echo = ("After your reasoning, provide the final answer ONLY in the following exact format "
            "on its own line: \\boxed{LETTER} for single-choice or \\boxed{A,B} for "
            "multiple-choice.\n\nInstruction: choose MULTIPLE options\n\nWhich ones?\n\n- (A) x\n"
            "- (B) y\n- (C) z\n\nNow provide reasoning, then the final answer in the boxed "
            "format:")
    assert several(echo) == []
    assert several(echo + " \\boxed{A,C}\n") == ["A", "C"]
    assert single("Choose exactly ONE option. End your reply with a line 'Answer: X' (letters "
                  "separated by commas).", letters="ABCDEFGHIJKLMNOPQRSTUVWXYZ") == []


def test_answer_stated_in_the_form_of_the_template_counts() -> None:
    reply = "Based on the reasoning, the final answer is: \\boxed{A, C} for single-choice or " \
            "\\boxed{A, C} for multiple-choice."
    assert several(reply) == ["A", "C"]


def test_long_lines_of_spaced_letters_do_not_backtrack() -> None:
    """A line of letters separated by runs of spaces that ends in a word made the previous
    lone-letter pattern backtrack exponentially (48 characters: about a minute)."""
    assert several("A  B  " * 40 + "x") == []
    assert several("Reasoning.\n" + "A  B  " * 40 + "\nAnswer: C") == ["C"]


def test_reply_ending_in_a_stated_choice_is_complete() -> None:
    assert several("Weighing both.\nSo options A and C are correct") == ["A", "C"]
    assert several("Weighing both.\n2. (B) is correct as well, and the") == []


def test_short_conclusions_in_prose() -> None:
    assert several("Both A and C.") == ["A", "C"]
    assert single("B, because the cache is flushed.") == ["B"]
    assert single("Step by step.\n\n1. A is wrong.\n2. B is right.\n\nSo B.") == ["B"]


# ------------------------------------------------------------- reasoning blocks


@pytest.mark.parametrize("tag", ["think", "thinking", "reasoning", "THINK", "Thinking"])
def test_every_reasoning_tag_opening_the_reply_is_skipped(tag: str) -> None:
    assert single(f"<{tag}>\nThe answer is B.\n</{tag}>\n\nC") == ["C"]
    assert single(f"<|im_start|>assistant\n<{tag}>\nMaybe the answer is B.\n</{tag}>\n**C**") == ["C"]
    assert single(f"<{tag}>\nThe answer is B. Hmm, let me keep checking whether") == []


def test_reasoning_block_then_answer_tag() -> None:
    reply = "<reasoning>\nA is wrong. B is right.\n</reasoning>\n<answer>\nB\n</answer>"
    assert single(reply) == ["B"]
    assert several("<think>\nA and C hold.\n</think>\n<answer>A, C</answer>") == ["A", "C"]


def test_reasoning_tags_mentioned_in_the_answer_are_text() -> None:
    mentions_closing = ("Answer: B\n\nExplanation: the reward checks that the completion closes "
                        "its reasoning with `</think>` before the `<answer>` tag, so option A "
                        "(which omits it) is wrong.")
    assert single(mentions_closing) == ["B"]
    assert single("Option (C) mentions `<think>` tags, which the template emits.\n\nAnswer: C") == ["C"]
    assert single('The regex r"^<think>.*?</think>$" needs DOTALL.\n\nAnswer: D') == ["D"]


def test_a_reasoning_pair_mentioned_inside_the_block_does_not_end_it() -> None:
    reply = "<think>\nThe format is `<think>...</think>` then the answer: B?\n</think>\nAnswer: C"
    assert single(reply) == ["C"]


def test_several_leading_reasoning_blocks_are_all_skipped() -> None:
    assert single("<think>\nOk.\n</think>\n\n<think>\nThe answer is A\n</think>\nAnswer: D") == ["D"]


def test_closing_tag_of_a_block_the_template_opened() -> None:
    assert single("Okay, the user asks about X. The answer is B. Wait, no.\n</think>\n\nAnswer: C") == ["C"]
    assert single("The answer is B, surely.</think>\n\nAnswer: C") == ["C"]


# ------------------------------------------------------------- joined letters


@pytest.mark.parametrize(("reply", "letters"), [
    ("Therefore the final answer is \\boxed{ABD}", ["A", "B", "D"]),
    ("\\boxed{AB}", ["A", "B"]),
    ("$\\boxed{\\text{CE}}$", ["C", "E"]),
    ("Answer: BD", ["B", "D"]),
    ("**Answer: ACE**", ["A", "C", "E"]),
    ("The correct options are BD.", ["B", "D"]),
    ("Weighing them all.\n\nBC", ["B", "C"]),
    ("Weighing them all.\n\n**AD**", ["A", "D"]),
    ("<answer>AC</answer>", ["A", "C"]),
])
def test_joined_letters_in_an_answer_position(reply: str, letters: list[str]) -> None:
    assert several(reply, letters="ABCDE") == letters


@pytest.mark.parametrize("reply", [
    "Answer: CPU",  # a letter that is no option
    "Answer: AA",  # a letter twice
    "The answer is OK",
    "It is fast.\n\nAPI",
    "The API is BAD, so option C is correct.",  # a run in prose, not in an answer position
])
def test_joined_capitals_that_are_words_are_not_letters(reply: str) -> None:
    assert several(reply, letters="ABCD") in ([], ["C"])
    assert "A" not in several(reply, letters="ABCD")


def test_joined_letters_are_no_single_choice_answer() -> None:
    assert single("\\boxed{AB}") == []
    assert single("Answer: BD") == []
    assert single("Answer: B") == ["B"]


# ------------------------------------------------ a list of answers after a marker


@pytest.mark.parametrize("reply", [
    "After analyzing each option, the correct options are:\n\n- **A**: The scheduler flushes "
    "the cache.\n- **C**: The allocator reuses memory.\n",
    "The correct answers are:\n\n- (A) The scheduler flushes the cache.\n- (C) The allocator "
    "reuses Memory Blocks.",
    "The correct answers are:\n1. A\n2. C",
    "The correct answers are:\n1. **A.** It flushes (see B).\n2. **C.** It reuses.",
    "Correct options:\n- A\n- C",
    "Answer:\nA\nC",
    "**Answer:**\n\n* **A**\n* **C**",
    "**Final answer:**\n\n- Option A\n\n- Option C\n\nBoth hold because of the Cache.",
    "Answer:\n- A: correct, uses the KV cache\n- B: incorrect\n- C: correct",
])
def test_a_list_after_a_marker_gives_the_leading_letter_of_every_item(reply: str) -> None:
    assert several(reply) == ["A", "C"]


def test_the_list_after_a_marker_ends_at_the_first_other_line() -> None:
    reply = "Answer:\n- A\n- C\n\nB is wrong because the D flag is unset."
    assert several(reply) == ["A", "C"]
    assert several("Therefore, the correct options are:\n\n- (A), (C)") == ["A", "C"]
    assert single("The answer is:\n\n**B**\n\nC is tempting but wrong.") == ["B"]


# ------------------------------------------- markers that name the rejected options


@pytest.mark.parametrize(("reply", "letters"), [
    ("**Correct answers:** B, C\n**Incorrect answers:** A, D, E", ["B", "C"]),
    ("Answer: B, C\n\nWrong answers: A, D", ["B", "C"]),
    ("**Answer: B, C**\n\nIncorrect answers: A (no cache), D (leaks), E (wrong API).", ["B", "C"]),
    ("Answer: A, C\n\nThe other answers are wrong: B ignores the cache and D leaks memory.",
     ["A", "C"]),
    ("Answer: A, C\n\nEliminated answers: B, D", ["A", "C"]),
    ("Answer: A, C\n\nExplanation of the answer: B ignores the cache, so it is excluded.",
     ["A", "C"]),
    ("The answer is A, C.\n\nReasoning behind the answer: D fails and B leaks.", ["A", "C"]),
    ("Final answer: A, C\n\nThe answers that are not correct are: B, D", ["A", "C"]),
])
def test_a_marker_of_rejected_options_is_no_answer(reply: str, letters: list[str]) -> None:
    assert several(reply) == letters


def test_a_negative_marker_does_not_override_a_single_answer() -> None:
    assert single("Correct answer: B\nWrong answers: A, C, D") == ["B"]
    assert single("Answer: B\n\nNot the answer: D") == ["B"]


@pytest.mark.parametrize("reply", [
    "Answer: B\n\nNote: the correct answer would be C if the flag were set.",
    "Answer: B\n\n(Assuming an older version, the answer would be C.)",
    "Answer: B\n\nHad the question asked about 2.x, the answer would have been C.",
])
def test_a_hypothetical_answer_does_not_beat_an_unconditional_one(reply: str) -> None:
    """Hypothetical: 'would be' under a condition contrary to fact or an assumption."""
    assert single(reply) == ["B"]


@pytest.mark.parametrize("reply", [
    "Answer: A\n\nWait, A re-raises. The correct answer would be C, because suppress swallows "
    "the error if it matches.",
    "The answer is B.\n\nHmm, B ignores symlinks. If we take symlinks into account, the correct "
    "answer is C.",
    "Answer: B\n\nHmm, B mutates the list. Unless I'm misreading the question, the answer is C.",
    "Both B and D work.\n\nThe answer is A? No. If I had to pick one, the best answer would be C.",
])
def test_a_later_answer_under_a_condition_is_still_the_replys_answer(reply: str) -> None:
    """A self-correction often carries an 'if': only a hypothetical one is set aside."""
    assert single(reply) == ["C"]


def test_a_conditional_answer_alone_still_counts() -> None:
    assert single("If the flag is set, the answer is C.") == ["C"]


# ---------------------------------------- what follows the answer in its sentence


@pytest.mark.parametrize("reply", [
    "Answer: C (B is a common misconception)",
    "Answer: C (option B would be correct for v1)",
    "Answer: C (per the RFC, section B)",
    "Answer: C (not B)",
    "Answer: C rather than B",
    "Answer: C instead of B",
    "Answer: C, unlike B",
    "Answer: C — unlike B, it flushes the cache",
    "Answer: C - B leaks memory",
    "The answer is C over B.",
    "The answer is C versus B in older versions.",
    "The answer is C if D is set.",
])
def test_letters_after_the_answer_in_an_aside_or_contrast_are_not_chosen(reply: str) -> None:
    assert single(reply) == ["C"]


@pytest.mark.parametrize("reply", [
    "Answer: A, C (B and D are wrong)",
    "Answer: A, C — B and D are wrong",
    "Answer: A, C – B and D are wrong",
    "Answer: A, C (excluding B)",
    "Answer: A, C (D is a distractor)",
    "The final answer is A, C (B, D: see above).",
    "Answer: A (uses the Cache), C",
])
def test_an_aside_after_a_list_of_letters_is_not_read(reply: str) -> None:
    assert several(reply) == ["A", "C"]


def test_parenthesised_letters_in_an_answer_still_count() -> None:
    assert several("Answer: (A) and (C)") == ["A", "C"]
    assert several("Answer: (A, C)") == ["A", "C"]
    assert single("Answer: (C) Uses the FSDP API with DDP fallback") == ["C"]


# ------------------------------------------- labels that reject the options they list


@pytest.mark.parametrize("reply", [
    "Correct: B, C\nIncorrect: A, D, E",
    "Incorrect: A, D, E\nCorrect: B, C",
    "Analysis done.\n\nEliminated: A, D\nRemaining: B, C",
    "True: B and C\nFalse: A, D and E",
    "Keep: B, C\nRuled out: A, D",
    "So B and C are right, and the incorrect ones are: A, D.",
    "Checked all five.\n\nValid: B, C\nWrong: A, D, E",
])
def test_a_label_that_rejects_its_letters_states_no_choice(reply: str) -> None:
    assert several(reply, letters="ABCDE") == ["B", "C"]


# ------------------------------------------------- a hedged answer then reconsidered


@pytest.mark.parametrize("reply", [
    "The answer is likely B. Let me check.\n\nWait, B fails for empty input. So C.\n\n**C**",
    # prose alone ("so option C is correct") no longer overrides it: explanations name options
    "The answer is probably B. Let me verify.\n\nActually B ignores the cache, so the answer is C.",
    "I think the answer is B. Let me double-check.\n\nHmm, B leaks memory.\n\nC",
])
def test_a_hedged_answer_gives_way_to_a_later_conclusion(reply: str) -> None:
    assert single(reply) == ["C"]


def test_a_hedged_answer_without_a_later_one_counts() -> None:
    assert single("The answer is likely B.") == ["B"]
    assert single("The answer is probably B, given the cache.\n\nAnswer: D") == ["D"]


# ------------------------------------------------------------ other written forms


@pytest.mark.parametrize("reply", [
    "**A** and **C** are correct.",
    "Reasoning.\n\n**A**, **C**",
    "Reasoning.\n\n**(A)** and **(C)**",
    "Answer: ['A', 'C']",
    'Answer: "A, C"',
    '{"answer": ["A", "C"]}',
    '```json\n{"answer": ["A", "C"]}\n```',
    "Answer：Ａ，Ｃ",
    "Answer: a, c",
    "Correct options: a and c",
])
def test_other_written_forms_of_two_letters(reply: str) -> None:
    assert several(reply) == ["A", "C"]


@pytest.mark.parametrize("reply", ["Answer: 'B'", "Answer: \u2018B\u2019", '{"answer": "B"}',
                                   "Answer：Ｂ", "\\boxed{b}", "answer: b.",
                                   "The answer is: b"])
def test_other_written_forms_of_one_letter(reply: str) -> None:
    assert single(reply) == ["B"]


@pytest.mark.parametrize("reply", ["The answer is a bit tricky.", "Answer: a cache is used.",
                                   "I'm sure the cache is used.", "Answer: it depends"])
def test_lower_case_words_after_a_marker_are_no_letters(reply: str) -> None:
    assert single(reply) == []


# ---------------------- second review: replies the first round of fixes misread
# Each case was read right before the first round (commit 428e3ab) and wrong after it.


@pytest.mark.parametrize("reply", [
    "The answer is likely **B**.\n\n### Option A\nRecomputes every call.\n\n### Option B\nUses "
    "the cache.\n\n### Option C\nNot thread-safe.",
    "The answer is likely **B**.\n\n**A**\nRecomputes every call.\n\n**B**\nUses the cache.\n\n"
    "**D**\nNot thread-safe.",
    "I think the answer is B.\n\nHere is why: the loop in option A never terminates, so the one "
    "that fails is A.",
    "The answer is probably (B).\n\nThe most common mistake is A.",
    "I think the answer is B.\n\nReasoning: the cache is shared, so option D would be the answer "
    "only on a single thread.",
    "I think the answer is B.\n\nNote: option A is true in PyTorch 1.x but not 2.x.",
    "I think the answer is B.\n\nThe key is: A.",
])
def test_a_hedged_answer_yields_only_to_a_later_explicit_one(reply: str) -> None:
    assert single(reply) == ["B"]


def test_a_hedged_list_of_answers_keeps_its_letters_over_a_later_summary() -> None:
    reply = ("I think the answer is A, B, D.\n\nEvaluating the most likely design decisions:\n"
             "- (A) is highly likely - handles partial joint mapping\n- (B) is highly likely - "
             "standard articulation state format\n- (D) is highly likely - matches IsaacLab's "
             "hierarchical structure\n- (E) is plausible - supports delta observations\n- (C) is "
             "questionable in phrasing but addresses a real integration need\n\nThe strongest "
             "integration design decisions are A, B, and D as they directly address format "
             "compatibility and data mapping between systems.")
    assert several(reply, letters="ABCDE") == ["A", "B", "D"]


@pytest.mark.parametrize(("reply", "letter"), [
    ("The answer is A.\n\nWait, that is wrong: A recomputes.\n\nThe correct answer is B, since it "
     "works even if the cache is cold.", "B"),
    ("Answer: A\n\nHmm, let me reconsider. Actually the answer is C, because it holds even if the "
     "tensor is on CPU.", "C"),
    ("My first guess: the answer is A.\n\nChecking the source: if the flag is set, the code "
     "returns early, so the answer is C.", "C"),
    ("Answer: A\n\nOn reflection, if we look at line 42, the final answer is C.", "C"),
])
def test_a_condition_word_near_a_later_answer_does_not_make_it_hypothetical(
        reply: str, letter: str) -> None:
    assert single(reply) == [letter]


@pytest.mark.parametrize(("reply", "letter"), [
    ("The statement that is NOT true is C.", "C"),
    ("Looking at each option, A, B and D hold.\n\nThe incorrect statement is C.", "C"),
    ("A, B and D are all valid uses.\n\nSo the option that does not apply is B.", "B"),
    ("The only option that does not deadlock is B.", "B"),
    ("The one that is not thread-safe is D.", "D"),
    ("The incorrect answer is B.", "B"),
    ("The wrong answer here is B, because it claims X.", "B"),
    ("The false statement is: C", "C"),
    ("**Incorrect statement: C**", "C"),
    ("There is no other choice: B.", "B"),
    ("Now, for the final answer: B.\n\nA fails because it recomputes; C fails because it leaks.",
     "B"),
])
def test_the_answer_to_a_not_question_is_the_rejected_option_it_names(reply: str, letter: str) -> None:
    assert single(reply) == [letter]


def test_rejected_options_are_the_answer_only_when_nothing_is_chosen() -> None:
    assert several("The false statements are A and D.") == ["A", "D"]
    assert several("**Correct answers:** B, C\n**Incorrect answers:** A, D, E") == ["B", "C"]
    assert several("Incorrect answers: A, D, E\n\nCorrect answers: B, C") == ["B", "C"]


@pytest.mark.parametrize("reply", [
    "**Answer:**\n- **C** is correct.\n- A is wrong because it recomputes.\n- B is wrong because "
    "it leaks.",
    "**Answer:**\n- C: correct\n- A: recomputes every call\n- B: leaks memory",
    "To determine the correct answer:\n\n- A: The loop never terminates.\n- C: Uses the cache and "
    "a lock.\n- B: Leaks memory.\n- D: Deadlocks.\n\nC is correct.",
])
def test_a_list_explaining_each_option_gives_the_one_it_marks_correct(reply: str) -> None:
    assert single(reply) == ["C"]


@pytest.mark.parametrize("reply", [
    "Let me evaluate each option to identify the correct answers:\n\n1. **Option A**: This is "
    "correct because the scheduler drains the queue.\n2. **Option B**: This is incorrect because "
    "it ignores the lock.\n3. **Option C**: This is correct since the cache is shared.\n4. "
    "**Option D**: This is not the case; D recomputes.\n\nSo A and C are correct.",
    "**Answer:**\n\n- **A** is correct: X\n- **B** is incorrect: Y\n- **C** is correct: Z",
    "**Answer:**\n\n1. **Option A**: Correct - it drains the queue.\n2. **Option B**: This is "
    "incorrect because it ignores the lock.\n3. **Option C**: Correct - shared cache.",
])
def test_list_items_that_reject_their_option_are_not_chosen(reply: str) -> None:
    assert several(reply) == ["A", "C"]


@pytest.mark.parametrize(("reply", "letters"), [
    ("Answer: C (and D)", ["C", "D"]),
    ("Answer: B (also D)", ["B", "D"]),
    ("Answer: A - B - D", ["A", "B", "D"]),
])
def test_letters_added_in_an_aside_or_between_dashes_count(reply: str, letters: list[str]) -> None:
    assert several(reply) == letters


@pytest.mark.parametrize("reply", [
    '{"answer": "B", "explanation": "A is wrong because it recomputes"}',
    '{"answer": "B", "reason": "Option D leaks"}',
])
def test_a_json_answer_ends_at_its_value(reply: str) -> None:
    assert single(reply) == ["B"]
    assert several('{"answer": ["A", "C"], "rejected": ["B", "D"]}') == ["A", "C"]


@pytest.mark.parametrize("reply", [
    "Looking at the options, the answer is a",  # cut off before "a cache ..."
    "Answer: i.e. the second one",
    "Answer: e.g.",
    # lower case counts only after a label or in a box: after "is" it may be the article
    "the answer is b.",
    "The correct options are a and c.",
])
def test_lower_case_outside_a_labelled_answer_is_no_letter(reply: str) -> None:
    assert single(reply, letters="ABCDEFGHI") == []


@pytest.mark.parametrize(("reply", "letters"), [
    ("Answer: CBD", FOUR),
    ("Answer: BAD", SIX),
    ("Answer: FACE", SIX),
    ("So we should use\nCBD", FOUR),
    ("The answer is ACID compliance.", FOUR),
])
def test_a_word_of_capitals_is_no_run_of_letters(reply: str, letters: str) -> None:
    assert several(reply, letters=letters) == []


@pytest.mark.parametrize(("reply", "letter"), [
    ("<think>\nThe format reward requires the completion to start with <think>. Option A says so. "
     "The answer is A? No.\n</think>\n\nAnswer: B", "B"),
    ("<think>\nQwen3 chat template inserts `<think>` automatically. So option C.\n</think>\n\n"
     "**Answer: C**", "C"),
    ('<think>\nThe regex is r"<think>.*" answer is A\n</think>\nAnswer: B', "B"),
    ("Okay. First guess: the answer is A. Let me check.\nThe reward needs the completion to start "
     "with <think>, which option C describes.\n</think>\n\n**C**", "C"),
    ("Okay, so is the answer A? Let me check. Actually C fits.</think>**C**", "C"),
    ("Hmm the answer is A? No wait. C fits better.</think>C", "C"),
    ("<think>\nhmm\n</thinking>\nAnswer: C", "C"),
])
def test_a_reasoning_tag_mentioned_inside_the_block_does_not_keep_it_open(
        reply: str, letter: str) -> None:
    assert single(reply) == [letter]


@pytest.mark.parametrize(("reply", "expected"), [
    # an apostrophe or an earlier quotation on the closing tag's line does not quote the tag
    ("<thinking>I'll check the user's claim that options' order matters. It doesn't. A.</thinking>"
     "\n\nAnswer: A", ["A"]),
    ("<think>\nWait 'til the loop is closed... that's C.</think>\n\nAnswer: C", ["C"]),
    ('<think>\nThe docs say "gather waits for all". So with return_exceptions the others keep '
     "running, and D is the one. So D.</think>\n\n**Answer: D**", ["D"]),
    ("<think>\n`subprocess.run(check=True) raises... So D.</think>\n\nAnswer: D", ["D"]),
    # a tag written inside inline code or a string is quoted
    ("<think>\nThe template ends with `</think>` and the answer.\n</think>\n\nAnswer: B", ["B"]),
    # DeepSeek's full-width special tokens before the opening tag
    ("<\uff5cAssistant\uff5c><think>\nThe answer is A? Let's verify B", []),
])
def test_a_closing_tag_is_quoted_only_when_its_own_word_opens_with_a_quote(reply: str,
                                                                            expected: list[str]) -> None:
    assert single(reply) == expected


@pytest.mark.parametrize(("reply", "expected"), [
    ("A is true but irrelevant here. Since C is not thread-safe I'd go with B.", ["B"]),
    ("A is right for lists, but the question is about tuples. D is not hashable so B.", ["B"]),
    ("B is correct in CPython 3.6 only. None of the others preserve order on every version so "
     "I choose C.", ["C"]),
])
def test_a_choice_after_a_rejecting_word_is_still_the_choice(reply: str, expected: list[str]) -> None:
    assert single(reply) == expected


def test_letters_under_a_heading_that_rejects_them_are_not_chosen() -> None:
    assert single("### Answer\n**C**\n\n### Eliminated\n**A**, **B**, **D**") == ["C"]
    assert several("### Correct\n**A**, **C**\n\n### Incorrect\n**B**, **D**", "ABCD") == ["A", "C"]
    assert several("## Correct answers\n\n**A**, **C**\n\n## Incorrect\n\n**B**, **D**",
                   "ABCD") == ["A", "C"]
