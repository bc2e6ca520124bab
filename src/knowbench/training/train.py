"""`knowbench train`: full or LoRA fine-tuning of a local model with the transformers Trainer.

The output directory ends up holding a model (`--method full`: config.json and weights) or a
LoRA adapter (`--method lora`: adapter_config.json naming the base model), the tokenizer, and
`knowbench-train.json`: the base model, the data's kind, source and hash, the configuration,
the loss over the training examples before and after training (`initial_loss`, `final_loss`:
the mean token loss of up to `LOSS_EXAMPLES` examples, model in eval mode), the Trainer's
logged losses, steps and wall time. Checkpoints go to `checkpoints/` every `save_steps`; a
command run again with the same configuration resumes from the latest one (optimizer,
scheduler and random states included), and one whose training finished returns at once.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from knowbench import __version__
from knowbench.errors import UserError
from knowbench.models.hf import load_model, render_chat, require, resolve_model
from knowbench.training.data import TrainingData

MANIFEST = "knowbench-train.json"
CONFIG_FILE = "knowbench-train-config.json"
CHECKPOINTS = "checkpoints"
LOSS_EXAMPLES = 64
IGNORE = -100


class TrainConfig(BaseModel):
    """Everything that decides what training produces (a resumed run must match it)."""

    model_config = ConfigDict(extra="forbid")

    base: str
    method: Literal["full", "lora"] = "lora"
    rank: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | None = Field(
        default=None, description="LoRA target modules; None: every linear layer but the head.")
    epochs: float = Field(default=1.0, gt=0)
    max_steps: int | None = Field(default=None, ge=1, description="Overrides epochs when set.")
    lr: float = Field(default=2e-4, gt=0)
    schedule: Literal["linear", "cosine", "constant"] = "linear"
    batch_size: int = Field(default=4, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    max_length: int = Field(default=512, ge=8)
    seed: int = 0
    save_steps: int = Field(default=200, ge=1)


def encode_examples(data: TrainingData, tokenizer: Any, max_length: int) -> list[dict[str, list[int]]]:
    """Token ids and labels. Plain text (corpus) is packed: texts joined with the end-of-text
    token and cut into blocks of `max_length`. A prompted example is one sequence with the
    prompt's labels masked; a long prompt loses its start, then the completion its end."""
    eos = tokenizer.eos_token_id
    if data.kind == "corpus":
        stream: list[int] = []
        for example in data.examples:
            stream.extend(tokenizer(example.completion)["input_ids"])
            if eos is not None:
                stream.append(int(eos))
        blocks = [stream[start:start + max_length] for start in range(0, len(stream), max_length)]
        return [{"input_ids": block, "labels": list(block)} for block in blocks if len(block) > 1]
    encoded = []
    special = not getattr(tokenizer, "chat_template", None)
    for example in data.examples:
        prompt = list(tokenizer(render_chat(tokenizer, example.messages),
                                add_special_tokens=special)["input_ids"])
        answer = list(tokenizer(example.completion, add_special_tokens=False)["input_ids"])
        if eos is not None:
            answer.append(int(eos))
        answer = answer[:max_length - 1]
        prompt = prompt[max(0, len(prompt) - (max_length - len(answer))):]
        encoded.append({"input_ids": prompt + answer, "labels": [IGNORE] * len(prompt) + answer})
    return encoded


def collate(pad: int) -> Callable[[list[dict[str, list[int]]]], dict[str, Any]]:
    def batch(rows: list[dict[str, list[int]]]) -> dict[str, Any]:
        import torch

        width = max(len(row["input_ids"]) for row in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            size = len(row["input_ids"])
            ids[index, :size] = torch.tensor(row["input_ids"])
            labels[index, :size] = torch.tensor(row["labels"])
            mask[index, :size] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}
    return batch


def mean_loss(model: Any, rows: list[dict[str, list[int]]], pad: int, device: str,
              batch_size: int = 8) -> float:
    """Mean token loss over `rows` (model in eval mode, no gradients)."""
    import torch

    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            batch = {key: value.to(device) for key, value in
                     collate(pad)(rows[start:start + batch_size]).items()}
            count = int((batch["labels"][:, 1:] != IGNORE).sum())
            total += float(model(**batch).loss) * count
            tokens += count
    if was_training:
        model.train()
    return round(total / max(tokens, 1), 6)


def latest_checkpoint(out: Path) -> Path | None:
    found = [path for path in (out / CHECKPOINTS).glob("checkpoint-*") if path.is_dir()]
    return max(found, key=lambda path: int(path.name.rpartition("-")[2]), default=None)


def check_base(base: str) -> None:
    """`UserError` unless training could start from `base` (the extra installed, a model
    directory or a name to look up offline, not an adapter); reads no weights."""
    require("train", "torch", "transformers", "peft", "accelerate")
    if resolve_model(base)[1] is not None:
        raise UserError(f"--model {base} is a LoRA adapter; train from its base model (or "
                        "from a full model directory)")


def train(config: TrainConfig, data: TrainingData, out: Path, *, overwrite: bool = False,
          on_progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train and write `out` (see the module docstring); returns the manifest."""
    check_base(config.base)
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    say = on_progress or (lambda message: None)
    identity = {"config": config.model_dump(mode="json"), "data_hash": data.content_hash}
    config_file = out / CONFIG_FILE
    if out.exists() and any(out.iterdir()):
        previous = json.loads(config_file.read_text()) if config_file.is_file() else None
        if overwrite:
            shutil.rmtree(out)
        elif previous != identity:
            raise UserError(f"{out} holds other training output (another configuration or data)"
                            "\n  fix: pass --overwrite to start over, or another --out")
        elif (out / MANIFEST).is_file():
            say(f"already trained: {out / MANIFEST}")
            return dict(json.loads((out / MANIFEST).read_text()))
    out.mkdir(parents=True, exist_ok=True)
    config_file.write_text(json.dumps(identity, indent=2) + "\n")

    started = time.monotonic()
    loaded = load_model(config.base, trainable=True, dtype="float32")
    model, tokenizer = loaded.model, loaded.tokenizer
    rows = encode_examples(data, tokenizer, config.max_length)
    if not rows:
        raise UserError(f"--data {data.kind}:{data.source} gave no example of 2 or more tokens")
    if config.method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=config.rank, lora_alpha=config.alpha, lora_dropout=config.dropout,
                          target_modules=config.target_modules or "all-linear",
                          task_type="CAUSAL_LM")
        try:
            model = get_peft_model(model, lora)
        except ValueError as error:
            raise UserError(f"--target-modules: {error}") from None
    pad = int(tokenizer.pad_token_id)
    probe = rows[:LOSS_EXAMPLES]
    resume = latest_checkpoint(out)
    initial = mean_loss(model, probe, pad, loaded.device) if resume is None else None
    cuda = loaded.device.startswith("cuda")
    arguments = TrainingArguments(
        output_dir=str(out / CHECKPOINTS), num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1, learning_rate=config.lr,
        lr_scheduler_type=config.schedule, per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum, seed=config.seed, data_seed=config.seed,
        logging_steps=1, save_strategy="steps", save_steps=config.save_steps, save_total_limit=2,
        report_to="none", disable_tqdm=True, use_cpu=not cuda, bf16=cuda,
        remove_unused_columns=False, dataloader_num_workers=0)
    history: list[dict[str, float]] = []

    class Progress(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            if logs and "loss" in logs:
                history.append({"step": state.global_step, "epoch": round(state.epoch or 0, 4),
                                "loss": round(float(logs["loss"]), 6)})
                say(f"step {state.global_step}/{state.max_steps} · epoch {state.epoch or 0:.2f} · "
                    f"loss {float(logs['loss']):.4f}")

    trainer = Trainer(model=model, args=arguments, train_dataset=rows,  # type: ignore[arg-type]
                      data_collator=collate(pad), callbacks=[Progress()])
    trainer.remove_callback(PrinterCallback)  # its raw dicts on stdout; Progress says it in words
    if resume is not None:
        say(f"resuming from {resume}")
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    final = mean_loss(model, probe, pad, loaded.device)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    manifest = {
        "knowbench": __version__, "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "base_model": loaded.ref, "base_identity": loaded.identity, "method": config.method,
        "config": config.model_dump(mode="json"),
        "data": {"kind": data.kind, "source": data.source, "hash": data.content_hash,
                 "examples": len(data.examples), "sequences": len(rows),
                 "tokens": sum(len(row["input_ids"]) for row in rows), **data.info},
        "initial_loss": initial, "final_loss": final,
        "train_loss": round(float(result.training_loss), 6),
        "steps": int(trainer.state.global_step),
        "resumed_from": str(resume.name) if resume else None,
        "wall_s": round(time.monotonic() - started, 3), "device": loaded.device,
        "log": history,
        "use": (f"knowbench run BENCH --model hf:{config.base} --adapter {out}"
                if config.method == "lora" else f"knowbench run BENCH --model hf:{out}"),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
