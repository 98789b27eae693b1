"""The workloads with their outputs preallocated: each peer that can write
into given arrays (NumPy's out=, PyTorch eager's out=) runs these formulas
over a small table of its operations, every step written into an output or
a scratch array allocated once, before the timing (as smelt's plans run with
their outputs given: bench/bench.c).  Full-size intermediates go to the
output itself where the formula allows.

out_formula(o, name) -> (make, run) or None: make(*inputs) returns the
buffers (the outputs first, then scratch), run(*inputs, bufs) fills the
outputs; None where the table lacks an operation (NumPy's erf, NumPy's
convolution).  PyTorch's convolution has no out=: it allocates its result,
and the steps after it write the given outputs.
"""

LR, B1, B2, EPS, T = 1e-3, 0.9, 0.999, 1e-8, 10
C1, C2 = 1 - B1 ** T, 1 - B2 ** T
K, C = 0.7978845608028654, 0.044715


class Ops:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def numpy_out(np):
    def red(f):
        return lambda x, o: f(x, axis=-1, keepdims=True, out=o)

    def where_pos(a, t, o):  # o = where(a > 0, t, o)
        np.copyto(o, t, where=a > 0)

    return Ops(empty=lambda shape: np.empty(shape, np.float32),
               add=lambda a, b, o: np.add(a, b, out=o), sub=lambda a, b, o: np.subtract(a, b, out=o),
               mul=lambda a, b, o: np.multiply(a, b, out=o), div=lambda a, b, o: np.divide(a, b, out=o),
               neg=lambda x, o: np.negative(x, out=o), exp=lambda x, o: np.exp(x, out=o),
               log=lambda x, o: np.log(x, out=o), tanh=lambda x, o: np.tanh(x, out=o),
               sqrt=lambda x, o: np.sqrt(x, out=o), relu=lambda x, o: np.maximum(x, 0, out=o), erf=None,
               amax=red(np.max), rsum=red(np.sum), rmean=red(np.mean),
               sum=lambda x, axis, o: np.sum(x, axis=axis, out=o), mean_all=lambda x, o: np.mean(x, out=o),
               matmul=lambda a, b, o: np.matmul(a, b, out=o), copy=lambda d, s: np.copyto(d, s),
               cat=lambda xs, axis, o: np.concatenate(xs, axis=axis, out=o),
               gather=lambda x, t, o: np.copyto(o, np.take_along_axis(x, t, -1)),
               T=lambda a: a.T, swap=lambda k: k.swapaxes(-1, -2), permute=lambda x, ax: x.transpose(ax),
               view=lambda o, shape: o.reshape(shape), where_pos=where_pos,
               take=lambda w, ids, o: np.take(w, ids, axis=0, out=o), conv=None)


def torch_out(torch):
    def red(f):
        return lambda x, o: f(x, dim=-1, keepdim=True, out=o)

    return Ops(empty=lambda shape: torch.empty(shape, dtype=torch.float32),
               add=lambda a, b, o: torch.add(a, b, out=o), sub=lambda a, b, o: torch.sub(a, b, out=o),
               mul=lambda a, b, o: torch.mul(a, b, out=o), div=lambda a, b, o: torch.div(a, b, out=o),
               neg=lambda x, o: torch.neg(x, out=o), exp=lambda x, o: torch.exp(x, out=o),
               log=lambda x, o: torch.log(x, out=o), tanh=lambda x, o: torch.tanh(x, out=o),
               sqrt=lambda x, o: torch.sqrt(x, out=o), relu=lambda x, o: torch.clamp_min(x, 0, out=o),
               erf=lambda x, o: torch.erf(x, out=o),
               amax=red(torch.amax), rsum=red(torch.sum), rmean=red(torch.mean),
               sum=lambda x, axis, o: torch.sum(x, dim=axis, out=o),
               mean_all=lambda x, o: torch.mean(x, dim=list(range(x.dim())), out=o),
               matmul=lambda a, b, o: torch.matmul(a, b, out=o), copy=lambda d, s: d.copy_(s),
               cat=lambda xs, axis, o: torch.cat(xs, dim=axis, out=o),
               gather=lambda x, t, o: torch.gather(x, -1, t, out=o),
               T=lambda a: a.t(), swap=lambda k: k.transpose(-1, -2), permute=lambda x, ax: x.permute(*ax),
               view=lambda o, shape: o.view(shape),
               where_pos=lambda a, t, o: torch.where(a > 0, t, o, out=o),
               take=lambda w, ids, o: torch.index_select(w, 0, ids.reshape(-1), out=o.view(-1, w.shape[1])),
               # (no out=: the convolution allocates its result; what follows it writes the outputs)
               conv=lambda x, w, pad, groups: (torch.nn.functional.conv2d if w.dim() == 4 else
                                               torch.nn.functional.conv1d)(x, w, padding=pad, groups=groups))


def _rows(x):
    return tuple(x.shape[:-1]) + (1,)


def _gelu_tanh(o, h, u):  # u = gelu_tanh(h)
    o.mul(h, h, u); o.mul(u, h, u); o.mul(u, C, u); o.add(u, h, u)
    o.mul(u, K, u); o.tanh(u, u); o.add(u, 1.0, u); o.mul(u, h, u); o.mul(u, 0.5, u)


def _layernorm(o, x, y, t, mu, v, w, b):  # y = layernorm(x) * w + b (x may be y)
    o.rmean(x, mu); o.sub(x, mu, y); o.mul(y, y, t); o.rmean(t, v)
    o.add(v, 1e-5, v); o.sqrt(v, v); o.div(y, v, y); o.mul(y, w, y); o.add(y, b, y)


def out_formula(o, name):
    E = o.empty
    if name == "add":
        return (lambda a, b: [E(a.shape)]), (lambda a, b, B: o.add(a, b, B[0]))
    if name == "chain8":
        def chain8(a, b, c, B):
            y = B[0]
            o.mul(a, b, y); o.add(y, c, y); o.mul(y, a, y); o.sub(y, b, y)
            o.mul(y, c, y); o.add(y, a, y); o.mul(y, b, y); o.sub(y, c, y)
        return (lambda a, b, c: [E(a.shape)]), chain8
    if name == "gelu_tanh":
        return (lambda x: [E(x.shape)]), (lambda x, B: _gelu_tanh(o, x, B[0]))
    if name == "gelu":
        if o.erf is None:
            return None
        def gelu(x, B):
            y = B[0]
            o.mul(x, 0.7071067811865476, y); o.erf(y, y); o.add(y, 1.0, y); o.mul(y, x, y); o.mul(y, 0.5, y)
        return (lambda x: [E(x.shape)]), gelu
    if name == "swish":
        def swish(x, B):
            y = B[0]
            o.neg(x, y); o.exp(y, y); o.add(y, 1.0, y); o.div(x, y, y)
        return (lambda x: [E(x.shape)]), swish
    if name == "where_exp":
        def where_exp(a, b, c, B):
            y, t = B
            o.exp(c, y); o.mul(a, b, t); o.where_pos(a, t, y); o.add(y, 1.0, y)
        return (lambda a, b, c: [E(a.shape), E(a.shape)]), where_exp
    if name == "adam":
        def adam(p, g, m, v, B):
            p2, m2, v2 = B
            o.mul(m, B1, m2); o.mul(g, 1 - B1, p2); o.add(m2, p2, m2)
            o.mul(g, g, p2); o.mul(p2, 1 - B2, p2); o.mul(v, B2, v2); o.add(v2, p2, v2)
            o.div(v2, C2, p2); o.sqrt(p2, p2); o.add(p2, EPS, p2); o.div(m2, p2, p2)
            o.mul(p2, LR / C1, p2); o.sub(p, p2, p2)
        return (lambda p, g, m, v: [E(p.shape), E(p.shape), E(p.shape)]), adam
    if name == "bias_relu":
        return (lambda m, r: [E(m.shape)]), (lambda m, r, B: (o.add(m, r, B[0]), o.relu(B[0], B[0])))
    if name == "layers100":
        def layers(x, w, b, B):
            y, t = B
            o.copy(t, x)
            for _ in range(100):
                o.mul(t, w, y); o.add(y, b, y); o.relu(y, y); o.mul(y, 0.5, y)
                o.mul(t, 0.5, t); o.add(y, t, y)
                o.copy(t, y)  # the barrier (a copy), as in smelt's workload
        return (lambda x, w, b: [E(x.shape), E(x.shape)]), layers
    if name == "softmax":
        def softmax(x, B):
            y, m, s = B
            o.amax(x, m); o.sub(x, m, y); o.exp(y, y); o.rsum(y, s); o.div(y, s, y)
        return (lambda x: [E(x.shape), E(_rows(x)), E(_rows(x))]), softmax
    if name == "layernorm":
        def layernorm(x, w, b, B):
            y, t, mu, v = B
            _layernorm(o, x, y, t, mu, v, w, b)
        return (lambda x, w, b: [E(x.shape), E(x.shape), E(_rows(x)), E(_rows(x))]), layernorm
    if name == "log_softmax":
        def log_softmax(x, B):
            y, t, m, s = B
            o.amax(x, m); o.sub(x, m, y); o.exp(y, t); o.rsum(t, s); o.log(s, s); o.sub(y, s, y)
        return (lambda x: [E(x.shape), E(x.shape), E(_rows(x)), E(_rows(x))]), log_softmax
    if name == "rmsnorm":
        def rmsnorm(x, w, B):
            y, t, r = B
            o.mul(x, x, t); o.rmean(t, r); o.add(r, 1e-6, r); o.sqrt(r, r); o.div(x, r, y); o.mul(y, w, y)
        return (lambda x, w: [E(x.shape), E(x.shape), E(_rows(x))]), rmsnorm
    if name == "sum_rows":
        return (lambda x: [E(x.shape[:-1])]), (lambda x, B: o.sum(x, -1, B[0]))
    if name == "sum_cols":
        return (lambda x: [E(x.shape[1:])]), (lambda x, B: o.sum(x, 0, B[0]))
    if name == "mse":
        def mse(a, b, B):
            y, t = B
            o.sub(a, b, t); o.mul(t, t, t); o.mean_all(t, y)
        return (lambda a, b: [E(()), E(a.shape)]), mse
    if name == "xent":
        def xent(x, tg, B):
            y, t, m, s, p = B
            o.amax(x, m); o.sub(x, m, t); o.exp(t, t); o.rsum(t, s); o.log(s, s); o.add(s, m, s)
            o.gather(x, tg, p); o.sub(s, p, s); o.mean_all(s, y)
        return (lambda x, tg: [E(()), E(x.shape), E(_rows(x)), E(_rows(x)), E(_rows(x))]), xent
    if name == "transpose_add":
        return (lambda a, b: [E(b.shape)]), (lambda a, b, B: o.add(o.T(a), b, B[0]))
    if name == "concat_relu":
        def concat_relu(a, b, c, d, B):
            o.cat((a, b, c, d), 1, B[0]); o.relu(B[0], B[0])
        return (lambda a, b, c, d: [E((a.shape[0], 4 * a.shape[1]))]), concat_relu
    if name == "mlp":
        def make(x, w1, b1, w2, b2, lw, lb):
            r, h = x.shape[0], w1.shape[1]
            return [E(x.shape), E((r, h)), E((r, h)), E(x.shape), E((r, 1)), E((r, 1))]

        def mlp(x, w1, b1, w2, b2, lw, lb, B):
            y, h, u, t, mu, v = B
            o.matmul(x, w1, h); o.add(h, b1, h); _gelu_tanh(o, h, u)
            o.matmul(u, w2, y); o.add(y, b2, y); o.add(y, x, y)
            _layernorm(o, y, y, t, mu, v, lw, lb)
        return make, mlp
    if name == "embed_ln":
        def embed_ln(W, ids, P, B):
            y, t, mu, v = B
            o.take(W, ids, y); o.add(y, P, y)
            o.rmean(y, mu); o.sub(y, mu, y); o.mul(y, y, t); o.rmean(t, v)
            o.add(v, 1e-5, v); o.sqrt(v, v); o.div(y, v, y)
        shape = lambda W, ids: tuple(ids.shape) + (W.shape[1],)
        return (lambda W, ids, P: [E(shape(W, ids)), E(shape(W, ids)), E(shape(W, ids)[:-1] + (1,)),
                                   E(shape(W, ids)[:-1] + (1,))]), embed_ln
    if name == "conv_bn_relu":
        if o.conv is None:
            return None

        def conv_bn_relu(x, w, scale, shift, mean, var, B):
            y, inv = B
            r = lambda a: o.view(a, (-1, 1, 1))
            o.add(r(var), 1e-5, inv); o.sqrt(inv, inv); o.div(r(scale), inv, inv)
            o.sub(o.conv(x, w, 1, 1), r(mean), y); o.mul(y, inv, y); o.add(y, r(shift), y); o.relu(y, y)
        return (lambda x, w, *bn: [E((x.shape[0], w.shape[0]) + tuple(x.shape[2:])), E((w.shape[0], 1, 1))]), conv_bn_relu
    if name == "conv1d_gelu":
        if o.conv is None or o.erf is None:
            return None

        def conv1d_gelu(x, w, b, B):
            y, t = B
            h = o.conv(x, w, 2, 2)
            o.add(h, o.view(b, (-1, 1)), h); o.mul(h, 0.7071067811865476, t); o.erf(t, t)
            o.add(t, 1.0, t); o.mul(t, h, t); o.mul(t, 0.5, t); o.amax(t, y)
        return (lambda x, w, b: [E((x.shape[0], w.shape[0], 1)), E((x.shape[0], w.shape[0], x.shape[2]))]), conv1d_gelu
    if name == "attention":
        def make(q, k, v):
            b, h, t, d = q.shape
            return [E((b, t, h * d)), E((b, h, t, t)), E((b, h, t, 1)), E((b, h, t, 1)), E(q.shape)]

        def attention(q, k, v, B):
            y, s, m, z, a = B
            o.matmul(q, o.swap(k), s); o.div(s, 8.0, s); o.amax(s, m); o.sub(s, m, s); o.exp(s, s)
            o.rsum(s, z); o.div(s, z, s); o.matmul(s, v, a)
            b, h, t, d = q.shape
            o.copy(o.view(y, (b, t, h, d)), o.permute(a, (0, 2, 1, 3)))
        return make, attention
    return None
