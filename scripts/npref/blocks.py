# SPDX-License-Identifier: MIT
"""npref.blocks: the float64 forward of the preln, rmsnorm and parallel blocks
on an npref.graph.Graph (the dit block is npref.adaln)."""

from .acts import ACTS


def forward_parallel(m):
    """GPT-J: one LN, attention and MLP side by side."""
    c = m.cfg
    d, f, act = c.d, c.d_mlp, ACTS[c.act]
    x = m.get("input")
    for i in range(c.layers):
        p = f"transformer.h.{i}."
        h = m.norm(x, p + "ln_1", True)
        a = m.attention(m.linear(h, p + "attn.q_proj", d, d),
                        m.linear(h, p + "attn.k_proj", d, d),
                        m.linear(h, p + "attn.v_proj", d, d))
        u = act(m.linear(h, p + "mlp.fc_in", f, d))
        u = m.online(u, p + "mlp.fc_out.online_hadamard.signs", f)
        x = (m.linear(a, p + "attn.out_proj", d, d) +
             m.linear(u, p + "mlp.fc_out", d, f)) + x
    if c.readout == "head":
        h = m.norm(x, "transformer.ln_f", True)
        w = m.get("lm_head.weight")
        return m.linear(h, "lm_head", w.shape[0], d)
    return residual_readout(m, x)


def forward_preln(m):
    c = m.cfg
    d, f, act = c.d, c.d_mlp, ACTS[c.act]
    x = m.get("input")
    for i in range(c.layers):
        p = f"blocks.{i}."
        h = m.norm(x, p + "norm1", True)
        qkv = m.linear(h, p + "attn.qkv", 3 * d, d)
        a = m.attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:])
        x = x + m.linear(a, p + "attn.proj", d, d)
        h = m.norm(x, p + "norm2", True)
        u = act(m.linear(h, p + "mlp.fc1", f, d))
        u = m.online(u, p + "mlp.fc2.online_hadamard.signs", f)
        x = x + m.linear(u, p + "mlp.fc2", d, f)
    if c.readout == "head":
        h = m.norm(x, "norm", True)
        w = m.get("head.weight")
        return m.linear(h, "head", w.shape[0], d)
    return residual_readout(m, x)


def forward_rmsnorm(m):
    """LLaMA: RMSNorm, RoPE, grouped-query attention, gated MLP."""
    c = m.cfg
    d, f, act = c.d, c.d_mlp, ACTS[c.act]
    x = m.get("input")
    for i in range(c.layers):
        p = f"layers.{i}."
        h = m.norm(x, p + "input_layernorm", False)
        dkv = d // c.heads * c.kv_heads
        q = m.rope(m.linear(h, p + "self_attn.q_proj", d, d), c.heads)
        k = m.rope(m.linear(h, p + "self_attn.k_proj", dkv, d), c.kv_heads)
        q = m.online(q, p + "online_qk.signs", d // c.heads)
        k = m.online(k, p + "online_qk.signs", d // c.heads)
        v = m.linear(h, p + "self_attn.v_proj", dkv, d)
        x = x + m.linear(m.attention(q, k, v), p + "self_attn.o_proj", d, d)
        h = m.norm(x, p + "post_attention_layernorm", False)
        g = act(m.linear(h, p + "mlp.gate_proj", f, d))
        u = m.linear(h, p + "mlp.up_proj", f, d)
        gu = m.online(g * u, p + "mlp.down_proj.online_hadamard.signs", f)
        x = x + m.linear(gu, p + "mlp.down_proj", d, f)
    if c.readout == "head":
        h = m.norm(x, "norm", False)
        w = m.get("lm_head.weight")
        return m.linear(h, "lm_head", w.shape[0], d)
    return residual_readout(m, x)


def residual_readout(m, x):
    """The last residual stream, mapped back to the original basis (x Q^T)
    and, for LayerNorm models, compared after removing each row's mean (the
    component fusion drops)."""
    d = m.cfg.d
    q = m.opt("readout.q", (d, d))
    if q is not None:
        x = x @ q.T
    if m.cfg.readout_center:
        x = x - x.mean(axis=1, keepdims=True)
    return x


BLOCKS = {"parallel": forward_parallel, "preln": forward_preln, "rmsnorm": forward_rmsnorm}
