"""End to end on the CPU, nothing downloaded: a tiny randomly initialised Llama
built from a transformers config, a tokenizer built here over a small vocabulary,
XGrammar compiling a JSON schema over that vocabulary.

- greedy generation through nexttok equals transformers' own greedy generate;
- grammar-constrained generations (greedy and sampled) parse and satisfy the
  schema, and every step's masked logits equal xgrammar.apply_token_bitmask_inplace's;
- sampled generations reproduce exactly from (seed, offset), step by step."""
import json

import pytest

from conftest import need

torch = need("torch")
transformers = need("transformers")
tokenizers = need("tokenizers")
xgr = need("xgrammar")
import nexttok  # noqa: E402
from nexttok.integrations import transformers as nt_hf  # noqa: E402

# The vocabulary: printable ASCII one character a token, a few pairs JSON uses
# often (merged by BPE), then the end-of-sequence token. The model's vocabulary is
# padded past it to 128 (ids the tokenizer never produces, which the grammar masks).
PAIRS = ['{"', '":', '",', '"}', ", ", "10", "ab"]
VOCAB = [chr(c) for c in range(32, 127)] + PAIRS + ["<eos>"]
EOS = len(VOCAB) - 1
MODEL_VOCAB = 128
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "count": {"type": "integer", "minimum": 0, "maximum": 999},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "count", "ok"],
    "additionalProperties": False,
}


def satisfies_schema(value):
    """SCHEMA's constraints, checked one by one."""
    return (isinstance(value, dict) and set(value) == {"name", "count", "ok"}
            and isinstance(value["name"], str) and len(value["name"]) <= 6
            and type(value["count"]) is int and 0 <= value["count"] <= 999
            and type(value["ok"]) is bool)


@pytest.fixture(scope="module")
def tokenizer():
    ids = {tok: i for i, tok in enumerate(VOCAB)}
    merges = [(p[0], p[1]) for p in PAIRS]
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=ids, merges=merges))
    tok.add_special_tokens(["<eos>"])
    tok.decoder = tokenizers.decoders.Fuse()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>",
                                                pad_token="<eos>")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(20240601)
    config = transformers.LlamaConfig(
        vocab_size=MODEL_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        eos_token_id=EOS, pad_token_id=EOS, bos_token_id=None)
    m = transformers.LlamaForCausalLM(config).eval()
    m.generation_config.eos_token_id = EOS
    m.generation_config.pad_token_id = EOS
    return m


@pytest.fixture(scope="module")
def compiled_schema():
    info = xgr.TokenizerInfo(VOCAB, xgr.VocabType.RAW, vocab_size=MODEL_VOCAB,
                             stop_token_ids=[EOS])
    return xgr.GrammarCompiler(info).compile_json_schema(json.dumps(SCHEMA),
                                                         any_whitespace=False)


def test_tokenizer_round_trip(tokenizer):
    text = '{"name": "ab", "count": 10, "ok": true}'
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert len(ids) < len(text)  # the pairs were merged
    assert all(0 <= i < EOS for i in ids)


def prompts(batch, length, seed):
    return torch.randint(0, EOS, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("repetition_penalty", [1.0, 1.3])
def test_greedy_equals_transformers_generate(model, repetition_penalty):
    input_ids = prompts(3, 7, 1)
    theirs = model.generate(input_ids, do_sample=False, max_new_tokens=24,
                            repetition_penalty=repetition_penalty)
    ours = nt_hf.generate(model, input_ids, do_sample=False, max_new_tokens=24,
                          repetition_penalty=repetition_penalty)
    assert ours.shape == theirs.shape and ours.shape[1] > input_ids.shape[1]
    assert torch.equal(ours, theirs)


def test_generate_refuses_unknown_config_fields(model):
    with pytest.raises(TypeError, match="top_q"):
        nt_hf.generate(model, prompts(1, 3, 4), max_new_tokens=2, top_q=0.5)
    with pytest.raises(ValueError, match="'input_ids' must be a 2-D tensor"):
        nt_hf.generate(model, prompts(1, 3, 4)[0], max_new_tokens=2)


class CheckedGrammar(nt_hf.GrammarBitmaskProcessor):
    """The processor, with every step's masked scores compared to xgrammar's own
    apply_token_bitmask_inplace on the same scores and bitmask."""

    steps = 0

    def __call__(self, input_ids, scores):
        before = scores.clone()
        masked = super().__call__(input_ids, scores)
        expected = before.clone()
        xgr.apply_token_bitmask_inplace(expected, self.bitmask)
        assert torch.equal(masked, expected)
        for r, m in enumerate(self.matchers):  # padded ids are masked while a row decodes
            assert m.is_terminated() or not bool(torch.isfinite(masked[r, len(VOCAB):]).any())
        self.steps += 1
        return masked


class Recorder(transformers.LogitsProcessor):
    """Keeps the scores the draw sees."""

    def __init__(self):
        self.scores = []

    def __call__(self, input_ids, scores):
        self.scores.append(scores.clone())
        return scores


def decode_json(tokenizer, row, prompt_length):
    new = row[prompt_length:].tolist()
    assert EOS in new, "the grammar ends every generation with the end-of-sequence token"
    return json.loads(tokenizer.decode(new[: new.index(EOS)]))


def grammar_generate(model, compiled, input_ids, **kw):
    matchers = [xgr.GrammarMatcher(compiled) for _ in range(input_ids.shape[0])]
    grammar = CheckedGrammar(matchers, MODEL_VOCAB)
    recorder = Recorder()
    out = nt_hf.generate(model, input_ids, logits_processor=[grammar, recorder],
                         max_new_tokens=120, **kw)
    assert grammar.steps == out.shape[1] - input_ids.shape[1]
    return out, recorder.scores


def test_greedy_json_parses_and_equals_transformers(model, tokenizer, compiled_schema):
    input_ids = prompts(2, 5, 2)
    ours, _ = grammar_generate(model, compiled_schema, input_ids, do_sample=False)
    matchers = [xgr.GrammarMatcher(compiled_schema) for _ in range(2)]
    theirs = model.generate(input_ids, do_sample=False, max_new_tokens=120,
                            logits_processor=[nt_hf.GrammarBitmaskProcessor(matchers,
                                                                            MODEL_VOCAB)])
    assert torch.equal(ours, theirs)
    for row in ours:
        assert satisfies_schema(decode_json(tokenizer, row, 5))


@pytest.mark.parametrize("params", [
    dict(temperature=1.0, top_k=0, top_p=1.0),
    dict(temperature=0.8, top_k=20, top_p=0.9, min_p=0.02),
    dict(temperature=1.5, top_k=0, top_p=0.95, repetition_penalty=1.2),
])
def test_sampled_json_is_valid_and_reproducible(model, tokenizer, compiled_schema, params):
    input_ids = prompts(4, 6, 3)
    seed, offset = 987654321, 40
    first, scores = grammar_generate(model, compiled_schema, input_ids, do_sample=True,
                                     seed=seed, offset=offset, **params)
    again, _ = grammar_generate(model, compiled_schema, input_ids, do_sample=True, seed=seed,
                                offset=offset, **params)
    assert torch.equal(first, again)
    texts = set()
    for row in first:
        value = decode_json(tokenizer, row, 6)
        assert satisfies_schema(value)
        texts.add(json.dumps(value))
    # each step's tokens are nexttok.sample's on that step's scores at (seed, offset + step)
    filters = {k: params.get(k, d) for k, d in (("temperature", 1.0), ("top_k", 0),
                                                ("top_p", 1.0), ("min_p", 0.0))}
    for step, step_scores in enumerate(scores):
        drawn = nexttok.sample(step_scores, seed=seed, offset=offset + step, **filters)
        new = first[:, 6 + step]
        live = (first[:, 6:6 + step] != EOS).all(dim=1)  # rows not finished before this step
        assert torch.equal(drawn[live], new[live])
    other, _ = grammar_generate(model, compiled_schema, input_ids, do_sample=True,
                                seed=seed + 1, offset=offset, **params)
    assert not torch.equal(other, first)
