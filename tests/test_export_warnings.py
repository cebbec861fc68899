"""The start-up warning that does not apply to these models (ORT's quantization pre-processing) is dropped around
the call that logs it, and nothing else is; the export logs no warning of its own."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from variants.building import export


def test_export_and_int8_log_neither_warning(tiny_qa_dir: Path, tmp_path: Path, caplog) -> None:
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    with caplog.at_level(logging.INFO):
        onnx_path = export.export_onnx(model, tokenizer, tmp_path / "onnx")
        export.quantize_int8(onnx_path, tmp_path / "int8")
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if m.startswith(export._NO_PRE_PROCESSING)], messages
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING], messages
    assert any("quantized" in m for m in messages)  # the build's own records still come through
    assert (tmp_path / "int8" / export.ONNX_NAME).is_file()


def test_only_the_named_message_is_dropped_and_only_inside_the_block(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.export.warnings")
    with caplog.at_level(logging.WARNING, logger=logger.name), export._without_message(logger, "Please consider"):
        logger.warning("Please consider to run pre-processing before quantization.")
        logger.warning("Something else went wrong")
    logger.warning("Please consider to run pre-processing before quantization.")
    assert [r.getMessage() for r in caplog.records] == [
        "Something else went wrong",
        "Please consider to run pre-processing before quantization.",
    ]
