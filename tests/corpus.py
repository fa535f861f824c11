"""Notebook patterns a restore must bring back: each one's setup, and a check of value, identity and behaviour.

Every setup is code a user types in a cell; every check is one expression, True in a kernel where the
pattern came back whole. Names are unique across patterns (prefixed), so all of them can share one
namespace. ``test_corpus.py`` restores them with jupyter-ckpt in a fresh kernel; ``benchmarks/fidelity.py``
does the same with ``dill.dump_module`` and Kishu. Files a pattern makes go under ``tempfile.gettempdir()``: both
start their kernels with a ``TMPDIR`` of their own, which they remove.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    name: str
    area: str
    setup: str
    check: str


def _p(name: str, area: str, setup: str, check: str) -> Pattern:
    return Pattern(name, area, setup.strip() + "\n", check.strip())


PATTERNS = [
    # -- plain Python -------------------------------------------------------------------------------
    _p(
        "alias",
        "plain",
        "al_a = [1, 2]\nal_b = al_a\nal_d = {'x': al_a}",
        "al_a is al_b is al_d['x'] and al_a == [1, 2]",
    ),
    _p("cycle", "plain", "cy_l = [1]\ncy_l.append(cy_l)", "cy_l[1] is cy_l and cy_l[0] == 1"),
    _p("nested", "plain", "ne_d = {'a': {'b': [1, {'c': (2, 3)}]}}", "ne_d == {'a': {'b': [1, {'c': (2, 3)}]}}"),
    _p("sets", "plain", "se_s = {1, 2, 3}\nse_f = frozenset('ab')", "se_s == {1, 2, 3} and se_f == frozenset('ab')"),
    _p(
        "bytes",
        "plain",
        "by_b = bytes(range(256))\nby_a = bytearray(b'xyz')",
        "by_b == bytes(range(256)) and by_a == b'xyz'",
    ),
    _p("big_int", "plain", "bi_n = 3 ** 400\nbi_c = 1 + 2j", "bi_n == 3 ** 400 and bi_c == 1 + 2j"),
    _p(
        "linked_list",
        "plain",
        "class LlNode:\n    def __init__(self, value, after):\n        self.value, self.after = value, after\n"
        "ll_head = None\nfor _ll_i in range(20_000):\n    ll_head = LlNode(_ll_i, ll_head)\ndel _ll_i",
        "ll_head.value == 19_999 and ll_head.after.after.value == 19_997 and type(ll_head.after) is LlNode",
    ),
    _p("function", "plain", "def fn_sq(x):\n    return x * x", "fn_sq(7) == 49"),
    _p(
        "exec_function",
        "plain",
        "ef_ns = {}\nexec('def ef_f():\\n    return x * 2', ef_ns)\nef_ns['x'] = 5\nef_f = ef_ns['ef_f']",
        "ef_f() == 10 and ef_f.__module__ is None and ef_ns['ef_f'] is ef_f",
    ),
    _p(
        "global_used",
        "plain",
        "gu_factor = 3\ndef gu_scale(x):\n    return x * gu_factor",
        "gu_scale(2) == 6 and (globals().__setitem__('gu_factor', 5) or gu_scale(2) == 10)",
    ),
    _p("lambda", "plain", "la_f = lambda v: v + 1", "la_f(1) == 2"),
    _p(
        "closure",
        "plain",
        "def cl_make():\n    n = [0]\n    def bump():\n        n[0] += 1\n        return n[0]\n    return bump\n"
        "cl_c = cl_make()\ncl_c()",
        "cl_c() == 2",
    ),
    _p(
        "defaults",
        "plain",
        "def de_f(a, b=[1], *, c=2):\n    return a + len(b) + c",
        "de_f(1) == 4 and de_f(1, c=0) == 2",
    ),
    _p(
        "class_instance",
        "plain",
        "class CiPoint:\n    def __init__(self, x):\n        self.x = x\n    def norm(self):\n        return abs(self.x)\n"
        "ci_p = CiPoint(-3)",
        "isinstance(ci_p, CiPoint) and ci_p.norm() == 3 and type(ci_p) is CiPoint",
    ),
    _p(
        "ledger",
        "plain",
        "class LeAccount:\n    ledger = []\n    def __init__(self, owner, balance):\n        self.owner = owner\n"
        "        self.balance = balance\n        LeAccount.ledger.append(self)\n"
        "le_a = LeAccount('ann', 5)\nle_b = LeAccount('bob', 7)",
        "LeAccount.ledger[0] is le_a and LeAccount.ledger[1] is le_b and sum(a.balance for a in LeAccount.ledger) == 12",
    ),
    _p(
        "subclass_registry",
        "plain",
        "class RgShape:\n    registry = {}\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n"
        "        RgShape.registry[cls.__name__] = cls\nclass RgSquare(RgShape):\n    pass\nclass RgCircle(RgShape):\n    pass\n"
        "rg_s = RgSquare()",
        "RgShape.registry == {'RgSquare': RgSquare, 'RgCircle': RgCircle} and isinstance(rg_s, RgShape)",
    ),
    _p(
        "metaclass",
        "plain",
        "class MeCounted(type):\n    made = 0\n    def __call__(cls, *a):\n        MeCounted.made += 1\n"
        "        return super().__call__(*a)\nclass MeThing(metaclass=MeCounted):\n    pass\nme_t = MeThing()",
        "type(MeThing) is MeCounted and isinstance(me_t, MeThing) and (MeThing() and MeCounted.made == 2)",
    ),
    _p(
        "abc",
        "plain",
        "import abc\nclass AbBase(abc.ABC):\n    @abc.abstractmethod\n    def area(self): ...\n"
        "class AbSq(AbBase):\n    def area(self):\n        return 4\nab_s = AbSq()",
        "isinstance(ab_s, AbBase) and ab_s.area() == 4 and AbBase.__abstractmethods__ == frozenset({'area'})",
    ),
    _p(
        "property_slots",
        "plain",
        "class PsVec:\n    __slots__ = ('x', 'y')\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    @property\n    def n2(self):\n        return self.x ** 2 + self.y ** 2\nps_v = PsVec(3, 4)",
        "ps_v.n2 == 25 and not hasattr(ps_v, '__dict__')",
    ),
    _p(  # property is written in C: no pickler took a subclass of it, so the class holding one was not saved
        "property_subclass",
        "plain",
        "class PscClassProperty(property):\n    def __get__(self, obj, owner=None):\n        return self.fget(owner)\n"
        "class PscCfg:\n    _n = 3\n    @PscClassProperty\n    def n(cls):\n        '''The n.'''\n        return cls._n\n"
        "psc_c = PscCfg()",
        "PscCfg.n == 3 and psc_c.n == 3 and type(vars(PscCfg)['n']) is PscClassProperty and vars(PscCfg)['n'].__doc__"
        " == 'The n.' and type(psc_c) is PscCfg",
    ),
    _p(
        "inheritance",
        "plain",
        "class InA:\n    def who(self):\n        return 'a'\nclass InB(InA):\n    def who(self):\n"
        "        return 'b' + super().who()\nin_b = InB()",
        "in_b.who() == 'ba' and isinstance(in_b, InA)",
    ),
    _p(
        "setstate_globals",
        "plain",
        "import threading as st_threading\nST_SEP = ','\nclass StTokenizer:\n    def __init__(self):\n"
        "        self.lock = st_threading.Lock()\n        self.sep = ST_SEP\n    def __getstate__(self):\n"
        "        return {}\n    def __setstate__(self, state):\n        self.__init__()\nst_t = StTokenizer()",
        "st_t.lock.acquire(blocking=False) and st_t.sep == ST_SEP == ','",
    ),
    _p(
        "weak_registry",
        "plain",
        "import weakref\nclass WkNode:\n    live = weakref.WeakSet()\n    def __init__(self):\n        WkNode.live.add(self)\n"
        "wk_n = WkNode()",
        "wk_n in WkNode.live and isinstance(WkNode.live, weakref.WeakSet)",
    ),
    _p(
        "weak_value",
        "plain",
        "import weakref\nclass WvItem:\n    pass\nwv_i = WvItem()\nwv_cache = weakref.WeakValueDictionary({'k': wv_i})",
        "wv_cache['k'] is wv_i",
    ),
    _p(
        "weak_ref",
        "plain",
        "import weakref\nclass WrNode:\n    pass\nwr_node = WrNode()\nwr_ref = weakref.ref(wr_node)",
        "wr_ref() is wr_node",
    ),
    _p(
        "weak_proxy",
        "plain",
        "import weakref\nclass WpNode:\n    pass\nwp_node = WpNode()\nwp_node.v = 3\nwp_live = weakref.proxy(wp_node)\n"
        "def wp_f():\n    return 4\nwp_call = weakref.proxy(wp_f)",
        "type(wp_live) is weakref.ProxyType and wp_live.v == 3 and (setattr(wp_node, 'v', 5), wp_live.v)[1] == 5"
        " and type(wp_call) is weakref.CallableProxyType and wp_call() == 4",
    ),
    _p(  # an observer's callbacks, held weakly
        "weak_method",
        "plain",
        "import weakref\nclass WmeButton:\n    def __init__(self):\n        self.listeners = []\n"
        "    def on_click(self, f):\n        self.listeners.append(weakref.WeakMethod(f))\n    def click(self):\n"
        "        return [r()() for r in self.listeners if r() is not None]\nclass WmeView:\n    def handle(self):\n"
        "        return 'handled'\nwme_view = WmeView()\nwme_button = WmeButton()\nwme_button.on_click(wme_view.handle)\n"
        "wme_button.on_click(WmeView().handle)",
        "wme_button.click() == ['handled'] and wme_button.listeners[0]().__self__ is wme_view"
        " and wme_button.listeners[1]() is None",
    ),
    _p(
        "dead_proxy",
        "plain",
        "import weakref\nclass DpNode:\n    pass\n_dp_gone = DpNode()\ndp_dead = weakref.proxy(_dp_gone)\ndel _dp_gone\n"
        "dp_kept = [1]",
        "type(dp_dead) is weakref.ProxyType and dp_kept == [1]"
        " and (repr(dp_dead).endswith('; dead>') or ' to NoneType at ' in repr(dp_dead))",  # 3.12, 3.11
    ),
    _p(
        "dict_view",
        "plain",
        "import types\ndv_d = {'a': 1, 'b': 2}\ndv_keys = dv_d.keys()\ndv_items = dv_d.items()\n"
        "dv_ro = types.MappingProxyType(dv_d)",
        "list(dv_keys) == ['a', 'b'] and (dv_d.__setitem__('c', 3) or ('c', 3) in dv_items and 'c' in dv_keys)"
        " and dv_ro['c'] == 3",
    ),
    _p(
        "redefined_class",
        "plain",
        "class RdModel:\n    def v(self):\n        return 1\nrd_old = RdModel()\n"
        "class RdModel:\n    def v(self):\n        return 2\nrd_new = RdModel()",
        "rd_old.v() == 1 and rd_new.v() == 2 and type(rd_new) is RdModel and type(rd_old) is not RdModel",
    ),
    _p(
        "bound_method",
        "plain",
        "class BmScaler:\n    def __init__(self):\n        self.k = 2\n    def apply(self, x):\n        return x * self.k\n"
        "bm_s = BmScaler()\nbm_apply = bm_s.apply",
        "bm_apply.__self__ is bm_s and (setattr(bm_s, 'k', 3) is None) and bm_apply(2) == 6",
    ),
    _p(
        "slots_shared",
        "plain",
        "class SlsBase:\n    __slots__ = ('items',)\nclass SlsBag(SlsBase):\n    __slots__ = 'owner'\n"
        "    def __init__(self, items, owner):\n        self.items, self.owner = items, owner\n"
        "sls_l = [1]\nsls_d = {'name': 'x'}\nsls_b = SlsBag(sls_l, sls_d)",
        "sls_b.items is sls_l and sls_b.owner is sls_d and not hasattr(sls_b, '__dict__')",
    ),
    _p(
        "object_key",
        "plain",
        "class OkKey:\n    def __init__(self, k):\n        self.k = k\n    def __eq__(self, other):\n"
        "        return isinstance(other, OkKey) and other.k == self.k\n    def __hash__(self):\n        return hash(self.k)\n"
        "ok_key = OkKey(1)\nok_names = {ok_key: 'one'}",
        "ok_names[OkKey(1)] == 'one' and next(iter(ok_names)) is ok_key",
    ),
    _p(
        "hashed_attribute_order",
        "plain",
        "class HoNode:\n    def __init__(self, name):\n        self.children = []\n        self.name = name\n"
        "    def __hash__(self):\n        return hash(self.name)\nho_n = HoNode('root')",
        "list(vars(ho_n)) == ['children', 'name'] and hash(ho_n) == hash('root')",
    ),
    _p(
        "closure_shared",
        "plain",
        "class CsCfg:\n    def __init__(self):\n        self.rate = 0.5\ncs_cfg = CsCfg()\ndef cs_make():\n    cfg = cs_cfg\n"
        "    def apply(x):\n        return x * cfg.rate\n    return apply\ncs_apply = cs_make()",
        "cs_apply(4) == 2.0 and (setattr(cs_cfg, 'rate', 1.0) is None) and cs_apply(4) == 4.0",
    ),
    _p(
        "forwarding_wrapper",
        "plain",
        "class PxWrap:\n    def __init__(self, inner):\n        self._inner = inner\n    def __getattr__(self, name):\n"
        "        return getattr(self._inner, name)\nclass PxSlim(PxWrap):\n    __slots__ = ('extra',)\n"
        "px_l = [3, 1, 2]\npx_w = PxWrap(px_l)\npx_s = PxSlim({'k': 1})\npx_s.extra = px_l",
        "px_w.count(1) == 1 and px_w._inner is px_l and px_s.get('k') == 1 and px_s.extra is px_l",
    ),
    _p(
        "method_on_instance",
        "plain",
        "import types\nclass MiCounter:\n    def __init__(self):\n        self.n = 2\n"
        "def mi_double(self):\n    return self.n * 2\nmi_c = MiCounter()\nmi_c.double = types.MethodType(mi_double, mi_c)",
        "mi_c.double() == 4 and mi_c.double.__self__ is mi_c and (setattr(mi_c, 'n', 5) or mi_c.double() == 10)",
    ),
    _p(
        "named_singleton",
        "plain",
        "class NsMissing:\n    def __reduce__(self):\n        return 'NS_MISSING'\n"
        "    def __repr__(self):\n        return '<missing>'\nNS_MISSING = NsMissing()\nNS_MISSING.seen = 2\n"
        "ns_defaults = {'depth': NS_MISSING}",
        "ns_defaults['depth'] is NS_MISSING and type(NS_MISSING) is NsMissing and NS_MISSING.seen == 2",
    ),
    _p(
        "custom_exception",
        "plain",
        "class ExFailed(Exception):\n    def __init__(self, code, msg):\n        super().__init__(msg)\n        self.code = code\n"
        "try:\n    raise ExFailed(5, 'bad row')\nexcept ExFailed as e:\n    ex_e = e",
        "ex_e.code == 5 and str(ex_e) == 'bad row' and isinstance(ex_e, ExFailed) and ExFailed(1, 'x').code == 1",
    ),
    _p(
        "exception_chain",
        "plain",
        "try:\n    try:\n        {}['k']\n    except KeyError as e:\n        raise ValueError('no k') from e\n"
        "except ValueError as e:\n    xc_e = e",
        "isinstance(xc_e.__cause__, KeyError) and xc_e.__cause__.args == ('k',) and str(xc_e) == 'no k'",
    ),
    _p(
        "metaclass_registry",
        "plain",
        "mr_registry = {}\nclass MrPluginMeta(type):\n    def __new__(m, name, bases, ns):\n"
        "        cls = super().__new__(m, name, bases, ns)\n        if bases:\n            mr_registry[name.lower()] = cls\n"
        "        return cls\nclass MrPlugin(metaclass=MrPluginMeta):\n    pass\nclass MrCSV(MrPlugin):\n    pass",
        "mr_registry == {'mrcsv': MrCSV} and type(MrCSV) is MrPluginMeta and issubclass(MrCSV, MrPlugin)"
        " and MrPluginMeta('MrJSON', (MrPlugin,), {}) is mr_registry['mrjson']",
    ),
    _p(
        "metaclass_registry_attribute",
        "plain",
        "class MraMeta(type):\n    plugins = []\n    def __init__(cls, name, bases, ns):\n        super().__init__(name, bases, ns)\n"
        "        MraMeta.plugins.append(cls)\nclass MraBase(metaclass=MraMeta):\n    pass\nclass MraA(MraBase):\n    pass\n"
        "mra_plugins = MraMeta.plugins",
        "mra_plugins == [MraBase, MraA] and mra_plugins is MraMeta.plugins and type(MraA) is MraMeta",
    ),
    _p(
        "init_subclass_global",
        "plain",
        "isg_registry = {}\nclass IsgBase:\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n"
        "        isg_registry[cls.__name__] = cls\nclass IsgA(IsgBase):\n    pass\nclass IsgB(IsgA):\n    pass",
        "isg_registry == {'IsgA': IsgA, 'IsgB': IsgB} and all(c is globals()[n] for n, c in isg_registry.items())",
    ),
    _p(
        "metaclass_and_init_subclass",
        "plain",
        "mis_by_tag = {}\nclass MisMeta(type):\n    def __init__(cls, name, bases, ns, **kw):\n"
        "        super().__init__(name, bases, ns)\n        cls.made = getattr(cls, 'made', 0) + 1\n"
        "class MisBase(metaclass=MisMeta):\n    def __init_subclass__(cls, tag=None, **kw):\n"
        "        super().__init_subclass__(**kw)\n        mis_by_tag[tag] = cls\nclass MisA(MisBase, tag='a'):\n    pass\n"
        "class MisB(MisA, tag='b'):\n    pass",
        "mis_by_tag == {'a': MisA, 'b': MisB} and (MisBase.made, MisA.made, MisB.made) == (1, 2, 3)"
        " and MisMeta('MisC', (MisB,), {}, tag='c') is mis_by_tag['c']",
    ),
    _p(
        "private_slots",
        "plain",
        "class PvTagged:\n    __slots__ = ('__tag',)\n    def __init__(self, tag):\n        self.__tag = tag\n"
        "    def tag(self):\n        return self.__tag\npv_t = PvTagged(5)",
        "pv_t.tag() == 5 and isinstance(pv_t, PvTagged) and not hasattr(pv_t, '__dict__') and PvTagged(6).tag() == 6",
    ),
    _p(
        "function_attributes",
        "plain",
        "fa_seen = []\ndef fa_note(x):\n    fa_note.log.append(x)\nfa_note.log = fa_seen",
        "fa_note.log is fa_seen and (fa_note(1) is None) and fa_seen == [1]",
    ),
    _p(
        "dunder_method_defaults",
        "plain",
        "dm_lines = []\nclass DmLog:\n    def __init__(self, into=dm_lines):\n        self.into = into\n"
        "    def __call__(self, line):\n        self.into.append(line)\ndm_log = DmLog()",
        "dm_log.into is dm_lines and DmLog().into is dm_lines and (dm_log('x') is None) and dm_lines == ['x']",
    ),
    _p(
        "new_with_arguments",
        "plain",
        "class NaUnit:\n    made = []\n    def __new__(cls, symbol):\n        o = super().__new__(cls)\n"
        "        o.symbol = symbol\n        cls.made.append(symbol)\n        return o\nna_m = NaUnit('m')\n"
        "class NaMoney(float):\n    def __new__(cls, amount, currency):\n        o = super().__new__(cls, amount)\n"
        "        o.currency = currency\n        return o\nna_price = NaMoney(2.5, 'EUR')",
        "na_m.symbol == 'm' and type(na_m) is NaUnit and NaUnit('s').symbol == 's' and NaUnit.made[-2:] == ['m', 's']"
        " and na_price + 1 == 3.5 and na_price.currency == 'EUR' and type(na_price) is NaMoney",
    ),
    _p(
        "hash_key_cycle",
        "plain",
        "class HkNode:\n    def __init__(self, name, graph):\n        self.name, self.graph = name, graph\n"
        "        graph.index[self] = len(graph.index)\n    def __hash__(self):\n        return hash(self.name)\n"
        "    def __eq__(self, other):\n        return isinstance(other, HkNode) and other.name == self.name\n"
        "class HkGraph:\n    def __init__(self):\n        self.index = {}\nhk_g = HkGraph()\n"
        "hk_a, hk_b = HkNode('a', hk_g), HkNode('b', hk_g)",
        "hk_g.index[hk_a] == 0 and hk_g.index[hk_b] == 1 and hk_a.graph is hk_g and HkNode('c', hk_g).graph is hk_g",
    ),
    _p(
        "protocol_generic",
        "plain",
        "from typing import Generic, Protocol, TypeVar, runtime_checkable\nPrgK = TypeVar('PrgK')\n@runtime_checkable\n"
        "class PrgSized(Protocol):\n    def size(self) -> int: ...\nclass PrgStack(Generic[PrgK]):\n    def __init__(self):\n"
        "        self.items = []\n    def size(self):\n        return len(self.items)\nprg_s = PrgStack[int]()\nprg_s.items.append(1)",
        "isinstance(prg_s, PrgSized) and prg_s.size() == 1 and PrgStack[int].__origin__ is PrgStack and type(prg_s) is PrgStack"
        " and not isinstance(1, PrgSized)",
    ),
    _p(
        "class_getitem",
        "plain",
        "class CgBox:\n    made = []\n    def __class_getitem__(cls, item):\n        CgBox.made.append(item)\n"
        "        return f'CgBox of {item.__name__}'\ncg_alias = CgBox[int]",
        "cg_alias == 'CgBox of int' and CgBox[str] == 'CgBox of str' and CgBox.made[-2:] == [int, str]",
    ),
    _p(
        "dict_missing",
        "plain",
        "class DmiUpper(dict):\n    def __missing__(self, key):\n        return key.upper()\ndmi_d = DmiUpper(a=1)\ndmi_d.note = 'n'",
        "dmi_d['a'] == 1 and dmi_d['zz'] == 'ZZ' and 'zz' not in dmi_d and type(dmi_d) is DmiUpper and dmi_d.note == 'n'",
    ),
    _p(  # their bases pickle them from their value alone: the attributes a cell gave them were gone (dill too)
        "value_subclass_attributes",
        "plain",
        "import collections, decimal, fractions\nclass VsaCounts(collections.Counter):\n    pass\n"
        "vsa_c = VsaCounts('aab')\nvsa_c.source = 'words.txt'\nclass VsaLists(collections.defaultdict):\n    pass\n"
        "vsa_d = VsaLists(list)\nvsa_d['k'].append(1)\nvsa_d.note = [vsa_c]\nclass VsaMoney(decimal.Decimal):\n    pass\n"
        "vsa_m = VsaMoney('2.50')\nvsa_m.currency = 'EUR'\nclass VsaRatio(fractions.Fraction):\n    pass\n"
        "vsa_r = VsaRatio(1, 3)\nvsa_r.label = 'third'",
        "vsa_c.source == 'words.txt' and vsa_c['a'] == 2 and vsa_d.note[0] is vsa_c and vsa_d['new'] == []"
        " and vsa_m.currency == 'EUR' and vsa_m == decimal.Decimal('2.5') and type(vsa_m) is VsaMoney"
        " and vsa_r.label == 'third' and vsa_r == fractions.Fraction(1, 3) and type(vsa_d) is VsaLists",
    ),
    _p(
        "property_setter_later",
        "plain",
        "class PslTemp:\n    def __init__(self):\n        self._c = 0\n    @property\n    def c(self):\n"
        "        return self._c\ndef _psl_set(self, v):\n    self._c = v * 2\n"
        "PslTemp.c = PslTemp.c.setter(_psl_set)\npsl_t = PslTemp()\npsl_t.c = 3\n",
        "psl_t.c == 6 and (setattr(psl_t, 'c', 1) or psl_t.c == 2) and PslTemp.c.fset.__name__ == '_psl_set'",
    ),
    _p(
        "type_dispatch_table",
        "plain",
        "dtk_table = {}\ndef dtk_register(t):\n    def deco(f):\n        dtk_table[t] = f\n        return f\n"
        "    return deco\nclass DtkCircle:\n    pass\n@dtk_register(DtkCircle)\ndef dtk_circle(x):\n"
        "    return 'circle'\n@dtk_register(int)\ndef dtk_int(x):\n    return 'int'\ndef dtk_dispatch(x):\n"
        "    return dtk_table[type(x)](x)\n",
        "dtk_dispatch(DtkCircle()) == 'circle' and dtk_table[DtkCircle] is dtk_circle and dtk_dispatch(1) == 'int'",
    ),
    _p(
        "metaclass_singleton",
        "plain",
        "class MsSingleton(type):\n    _instances = {}\n    def __call__(cls, *a, **k):\n"
        "        if cls not in cls._instances:\n            cls._instances[cls] = super().__call__(*a, **k)\n"
        "        return cls._instances[cls]\nclass MsConfig(metaclass=MsSingleton):\n"
        "    def __init__(self):\n        self.values = {}\nms_c = MsConfig()\nms_c.values['k'] = 1\n",
        "MsConfig() is ms_c and ms_c.values == {'k': 1} and MsSingleton._instances[MsConfig] is ms_c",
    ),
    _p(
        "init_subclass_kwargs",
        "plain",
        "class IskPlugin:\n    by_name = {}\n    def __init_subclass__(cls, /, name, **kw):\n"
        "        super().__init_subclass__(**kw)\n        cls.plugin_name = name\n"
        "        IskPlugin.by_name[name] = cls\nclass IskCsv(IskPlugin, name='csv'):\n    pass\n",
        "IskPlugin.by_name == {'csv': IskCsv} and IskCsv.plugin_name == 'csv' and type('IskJson', (IskPlugin,), {}, name='json').plugin_name == 'json' and IskPlugin.by_name['json'].__name__ == 'IskJson'",
    ),
    _p(
        "nested_class",
        "plain",
        "class CncOuter:\n    class Inner:\n        def __init__(self, v):\n            self.v = v\n"
        "    def make(self):\n        return CncOuter.Inner(3)\ncnc_i = CncOuter().make()\n",
        "type(cnc_i) is CncOuter.Inner and cnc_i.v == 3 and CncOuter.Inner.__qualname__ == 'CncOuter.Inner'",
    ),
    _p(
        "local_class",
        "plain",
        "def clc_make(v):\n    class Local:\n        def __init__(self):\n            self.v = v\n"
        "        def twice(self):\n            return 2 * self.v\n    return Local()\nclc_a = clc_make(2)\n"
        "clc_b = clc_make(5)\n",
        "clc_a.twice() == 4 and clc_b.twice() == 10 and type(clc_a).__qualname__ == 'clc_make.<locals>.Local'",
    ),
    _p(
        "deleted_class",
        "plain",
        "class CdcTemp:\n    def __init__(self):\n        self.k = 1\n    def get(self):\n"
        "        return self.k\ncdc_o = CdcTemp()\ndel CdcTemp\n",
        "cdc_o.get() == 1 and type(cdc_o).__name__ == 'CdcTemp' and 'CdcTemp' not in globals()",
    ),
    _p(
        "exception_notes_group",
        "plain",
        "try:\n    raise ValueError('bad')\nexcept ValueError as e:\n    e.add_note('row 5')\n    cen_e = e\n"
        "cen_g = ExceptionGroup('many', [KeyError('k'), cen_e])\n",
        "cen_e.__notes__ == ['row 5'] and cen_g.exceptions[1] is cen_e and isinstance(cen_g.exceptions[0], KeyError) and str(cen_g) == 'many (2 sub-exceptions)'",
    ),
    _p(
        "recursive_closure",
        "plain",
        "def crc_make():\n    def fact(n):\n        return 1 if n < 2 else n * fact(n - 1)\n    return fact\n"
        "crc_f = crc_make()\n",
        "crc_f(5) == 120",
    ),
    _p(
        "slots_and_dict",
        "plain",
        "class CsdMixed:\n    __slots__ = ('a', '__dict__')\n    def __init__(self):\n        self.a = 1\n"
        "        self.b = 2\ncsd_m = CsdMixed()\n",
        "csd_m.a == 1 and csd_m.b == 2 and vars(csd_m) == {'b': 2}",
    ),
    _p(
        "class_lambda_attribute",
        "plain",
        "class CclUnits:\n    convert = staticmethod(lambda x: x * CclUnits.factor)\n    factor = 10\n"
        "    key = lambda self: self.factor\nccl_u = CclUnits()\n",
        "CclUnits.convert(2) == 20 and ccl_u.key() == 10",
    ),
    _p(
        "abstract_property_setter",
        "plain",
        "import abc\nclass CapBase(abc.ABC):\n    @property\n    @abc.abstractmethod\n"
        "    def size(self): ...\nclass CapImpl(CapBase):\n    def __init__(self):\n        self._s = 1\n"
        "    @property\n    def size(self):\n        return self._s\n    @size.setter\n"
        "    def size(self, v):\n        self._s = v\ncap_i = CapImpl()\ncap_i.size = 4\n",
        "cap_i.size == 4 and CapBase.__abstractmethods__ == frozenset({'size'}) and isinstance(cap_i, CapBase)",
    ),
    _p(
        "classmethod_property",
        "plain",
        "class CmpCfg:\n    _name = 'cfg'\n    @classmethod\n    @property\n    def label(cls):\n"
        "        return cls._name.upper()\ncmp_c = CmpCfg()\n",
        "CmpCfg.label == 'CFG' and cmp_c.label == 'CFG'",
    ),
    _p(
        "abstract_classmethod",
        "plain",
        "import abc\nclass AcmBase(abc.ABC):\n    @classmethod\n    @abc.abstractmethod\n"
        "    def make(cls): ...\nclass AcmImpl(AcmBase):\n    @classmethod\n    def make(cls):\n"
        "        return cls()\nacm_i = AcmImpl.make()\n",
        "isinstance(acm_i, AcmBase) and AcmBase.__abstractmethods__ == frozenset({'make'}) and type(AcmImpl.make()) is AcmImpl",
    ),
    _p(
        "registry_decorator_class",
        "plain",
        "rdc_handlers = {}\ndef rdc_handles(*kinds):\n    def deco(cls):\n        for k in kinds:\n"
        "            rdc_handlers[k] = cls\n        cls.kinds = kinds\n        return cls\n    return deco\n"
        "@rdc_handles('csv', 'tsv')\nclass RdcTable:\n    pass\nrdc_made = rdc_handlers['tsv']()\n",
        "rdc_handlers['csv'] is RdcTable and type(rdc_made) is RdcTable and RdcTable.kinds == ('csv', 'tsv')",
    ),
    # -- standard library --------------------------------------------------------------------------
    _p(
        "lru_cache",
        "stdlib",
        "import functools\n@functools.lru_cache(maxsize=None)\ndef lc_sq(n):\n    return n * n\nlc_sq(4)",
        "lc_sq(5) == 25 and lc_sq.cache_info().maxsize is None",
    ),
    _p(
        "cache",
        "stdlib",
        "import functools\n@functools.cache\ndef ca_fib(n):\n    return n if n < 2 else ca_fib(n - 1) + ca_fib(n - 2)",
        "ca_fib(30) == 832040",
    ),
    _p(
        "wraps",
        "stdlib",
        "import functools\ndef wr_logged(f):\n    @functools.wraps(f)\n    def inner(*a):\n        return f(*a) + 1\n"
        "    return inner\n@wr_logged\ndef wr_add(a, b):\n    return a + b",
        "wr_add(1, 2) == 4 and wr_add.__name__ == wr_add.__qualname__ == 'wr_add' and repr(wr_add).startswith("
        "'<function wr_add at')",
    ),
    _p(
        "wraps_stacked",
        "stdlib",
        "import functools, pickle\ndef wst_logged(f):\n    @functools.wraps(f)\n    def wrapper(*a, **k):\n"
        "        return f(*a, **k)\n    return wrapper\ndef wst_timed(f):\n    @functools.wraps(f)\n    def inner(*a, **k):\n"
        '        return f(*a, **k)\n    return inner\n@wst_logged\n@wst_timed\ndef wst_fib(n):\n    """Fibonacci."""\n'
        "    return n if n < 2 else wst_fib(n - 1) + wst_fib(n - 2)\nclass WstArea:\n    @wst_logged\n    @wst_timed\n"
        "    def of(self, r):\n        return 3 * r * r",
        "wst_fib.__qualname__ == wst_fib.__wrapped__.__qualname__ == 'wst_fib' and repr(wst_fib).startswith("
        "'<function wst_fib at') and wst_fib(10) == 55 and wst_fib.__doc__ == 'Fibonacci.' and pickle.loads("
        "pickle.dumps(wst_fib)) is wst_fib and WstArea.of.__qualname__ == 'WstArea.of' and WstArea().of(1) == 3",
    ),
    _p(  # functools.wraps gives the notebook's function the library function's module and name
        "wraps_library_function",
        "stdlib",
        "import colorsys, functools\nwlf_calls = []\nwlf_original = colorsys.rgb_to_hsv\n"
        "@functools.wraps(wlf_original)\ndef wlf_hsv(*a):\n    wlf_calls.append(a)\n    return wlf_original(*a)\n"
        "colorsys.rgb_to_hsv = wlf_hsv",
        "colorsys.rgb_to_hsv is wlf_hsv and wlf_hsv.__wrapped__ is wlf_original is not wlf_hsv and "
        "(colorsys.rgb_to_hsv(1, 0, 0), wlf_calls)[1] == [(1, 0, 0)] and wlf_hsv.__module__ == 'colorsys'",
    ),
    _p(
        "partial",
        "stdlib",
        "import functools\ndef pa_pow(b, e):\n    return b ** e\npa_sq = functools.partial(pa_pow, e=2)",
        "pa_sq(9) == 81",
    ),
    _p(
        "partial_shared",
        "stdlib",
        "import functools\npsh_log = []\ndef psh_record(log, x):\n    log.append(x)\n"
        "psh_note = functools.partial(psh_record, psh_log)",
        "psh_note(1) is None and psh_log == [1]",
    ),
    _p(
        "singledispatch",
        "stdlib",
        "import functools\n@functools.singledispatch\ndef sd_f(x):\n    return 'any'\n@sd_f.register\ndef _(x: int):\n"
        "    return 'int'",
        "sd_f(1) == 'int' and sd_f('s') == 'any'",
    ),
    _p(
        "singledispatch_class",
        "stdlib",
        "import functools\nclass SdcPoint:\n    pass\n@functools.singledispatch\ndef sdc_describe(x):\n    return 'thing'\n"
        "@sdc_describe.register\ndef _(x: SdcPoint):\n    return 'point'",
        "sdc_describe(SdcPoint()) == 'point' and SdcPoint in sdc_describe.registry and sdc_describe(1) == 'thing'",
    ),
    _p(
        "singledispatchmethod",
        "stdlib",
        "import functools\nclass SdmShape:\n    pass\nclass SdmCircle(SdmShape):\n    pass\nclass SdmRenderer:\n"
        "    @functools.singledispatchmethod\n    def render(self, x):\n        return 'thing'\n    @render.register\n"
        "    def _(self, x: SdmShape):\n        return 'shape'\nsdm_r = SdmRenderer()",
        "sdm_r.render(SdmCircle()) == 'shape' and sdm_r.render(1) == 'thing'",
    ),
    _p(
        "singledispatch_abc",
        "stdlib",
        "import abc, collections.abc, functools\nclass SdaShape(abc.ABC):\n    pass\nclass SdaSquare:\n    pass\n"
        "SdaShape.register(SdaSquare)\n@functools.singledispatch\ndef sda_kind(x):\n    return 'other'\n"
        "@sda_kind.register\ndef _(x: collections.abc.Mapping):\n    return 'mapping'\n@sda_kind.register\n"
        "def _(x: SdaShape):\n    return 'shape'",
        "sda_kind(SdaSquare()) == 'shape' and sda_kind({}) == 'mapping' and sda_kind(1) == 'other'"
        " and issubclass(SdaSquare, SdaShape)",
    ),
    _p(
        "library_abc_register",
        "stdlib",
        "import collections.abc\nclass LarRows:\n    def __init__(self, *rows):\n        self.rows = list(rows)\n"
        "    def __getitem__(self, i):\n        return self.rows[i]\n    def __len__(self):\n        return len(self.rows)\n"
        "collections.abc.Sequence.register(LarRows)\nlar_r = LarRows(1, 2)",
        "isinstance(lar_r, collections.abc.Sequence) and issubclass(LarRows, collections.abc.Sequence) and lar_r[1] == 2",
    ),
    _p(  # how pickle (multiprocessing, joblib) takes a notebook class and a library's: copyreg, which imports refill
        "copyreg_registered",
        "stdlib",
        "import copyreg, pickle, sqlite3\nclass CprPoint:\n    def __init__(self, x):\n        self.x = x\ncpr_made = []\n"
        "def cpr_make(x):\n    cpr_made.append(x)\n    return CprPoint(x)\ndef cpr_reduce(p):\n    return cpr_make, (p.x,)\n"
        "copyreg.pickle(CprPoint, cpr_reduce)\ncpr_p = CprPoint(3)\ndef cpr_connection(c):\n"
        "    return sqlite3.connect, (':memory:',)\ncopyreg.pickle(sqlite3.Connection, cpr_connection)",
        "copyreg.dispatch_table.get(CprPoint) is cpr_reduce and cpr_p.x == 3 and type(cpr_p) is CprPoint"
        " and (pickle.loads(pickle.dumps(CprPoint(5))).x, cpr_made[-1]) == (5, 5)"
        " and type(pickle.loads(pickle.dumps(sqlite3.connect(':memory:')))) is sqlite3.Connection",
    ),
    _p(
        "warnings_filter",
        "stdlib",
        "import warnings\nclass WfNoise(UserWarning):\n    pass\n"
        "warnings.filterwarnings('ignore', message='wf quiet', category=WfNoise)\n"
        "def wf_shown(text):\n    with warnings.catch_warnings(record=True) as seen:\n"
        "        warnings.warn(text, WfNoise)\n    return len(seen)",
        "wf_shown('wf quiet, please') == 0 and wf_shown('wf loud') == 1",
    ),
    _p(
        "logging_config",
        "stdlib",
        "import logging\nlogging.basicConfig(level=logging.INFO, format='LG %(message)s')\n"
        "lg_app = logging.getLogger('lg_app')\nlg_app.setLevel(logging.DEBUG)",
        "logging.getLogger().level == logging.INFO and lg_app.getEffectiveLevel() == logging.DEBUG"
        " and [h.formatter._fmt for h in logging.getLogger().handlers] == ['LG %(message)s']",
    ),
    _p(
        "logging_handler_variable",
        "stdlib",
        "import logging\nlhv_seen = []\nclass LhvList(logging.Handler):\n    def emit(self, record):\n"
        "        lhv_seen.append(record.getMessage())\nlhv_handler = LhvList()\n"
        "lhv_log = logging.getLogger('lhv_app')\nlhv_log.addHandler(lhv_handler)\nlhv_log.warning('one')",
        "lhv_log.handlers == [lhv_handler] and (lhv_log.warning('two') or lhv_seen[-2:] == ['one', 'two'])",
    ),
    _p(
        "environment",
        "stdlib",
        "%env EN_HOME=/tmp/en-home\nimport os\nos.environ['EN_MODE'] = 'fast'",
        "os.environ.get('EN_MODE') == 'fast' and os.environ.get('EN_HOME') == '/tmp/en-home'",
    ),
    _p(
        "locks",
        "stdlib",
        "import threading\nlk_guard = threading.RLock()\nlk_cond = threading.Condition()\n"
        "lk_held = threading.RLock()\nlk_held.acquire()",
        "lk_guard.acquire(timeout=1) and lk_cond.acquire(timeout=1) and lk_held._is_owned()"
        " and (lk_held.release() or not lk_held._is_owned())",
    ),
    _p(  # ``with ThreadPoolExecutor() as pool:`` leaves ``pool`` in the namespace, shut down
        "executors",
        "stdlib",
        "from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(3, thread_name_prefix='exc') as exc_pool:"
        "\n    exc_out = list(exc_pool.map(abs, [-1, -2]))\nexc_live = ThreadPoolExecutor(2)",
        "exc_out == [1, 2] and exc_pool._shutdown and exc_pool._max_workers == 3 and exc_live.submit(abs, -3).result() == 3",
    ),
    _p(  # ``with Pool() as pool:`` leaves ``pool`` terminated in the namespace
        "multiprocessing_pools",
        "stdlib",
        "import multiprocessing\nfrom multiprocessing.pool import ThreadPool\nwith multiprocessing.Pool(1) as mpo_done:\n"
        "    mpo_out = mpo_done.map(abs, [-1, -2])\nmpo_live = ThreadPool(2)",
        "mpo_out == [1, 2] and mpo_done._state == 'TERMINATE' and mpo_done.join() is None"
        " and mpo_live.map(abs, [-3]) == [3]",
    ),
    _p(
        "ipython_config",
        "stdlib",
        "%load_ext autoreload\n%autoreload 2\n%precision 3",
        "'IPython.extensions.autoreload' in get_ipython().extension_manager.loaded"
        " and get_ipython().display_formatter.formatters['text/plain'].float_precision == '3'",
    ),
    _p(
        "module_attribute",
        "stdlib",
        "import statistics, string\nfrom fractions import Fraction as MaFraction\n"
        "def ma_mean(xs):\n    return 'mine'\nstatistics.mean = ma_mean\n"
        "MaFraction.ma_half = lambda self: self / 2\nstring.ma_setting = {'depth': 3}",
        "statistics.mean is ma_mean and MaFraction(1).ma_half() == MaFraction(1, 2)"
        " and string.ma_setting == {'depth': 3}",
    ),
    _p(  # an object a project module holds, changed by the cells
        "project_object",
        "stdlib",
        "import os, sys, tempfile\n_pob_dir = os.path.join(tempfile.gettempdir(), 'pob_project')\n"
        "os.makedirs(_pob_dir, exist_ok=True)\nwith open(os.path.join(_pob_dir, 'pob_config.py'), 'w') as _pob_f:\n"
        "    _pob_f.write('class Settings:\\n    def __init__(self):\\n        self.lr = 0.1\\n        self.tags = []\\n"
        "settings = Settings()\\n')\nsys.path.insert(0, _pob_dir)\ndel _pob_dir, _pob_f\n"
        "from pob_config import settings as pob_settings\npob_settings.lr = 0.5\npob_settings.tags.append('x')",
        "pob_settings.lr == 0.5 and pob_settings.tags == ['x'] and sys.modules['pob_config'].settings is pob_settings",
    ),
    _p(  # how a later cell's output shows a notebook class and a library's: registered with the shell, not a variable
        "display_formatter",
        "stdlib",
        "import fractions\nclass DfMoney:\n    def __init__(self, v):\n        self.v = v\ndef df_show(m, p, cycle):\n"
        "    p.text(f'${m.v:.2f}')\ndef df_html(f):\n    return f'<b>{f}</b>'\n"
        "get_ipython().display_formatter.formatters['text/plain'].for_type(DfMoney, df_show)\n"
        "get_ipython().display_formatter.formatters['text/html'].for_type(fractions.Fraction, df_html)\ndf_m = DfMoney(3)",
        "get_ipython().display_formatter.format(df_m)[0]['text/plain'] == '$3.00'"
        " and get_ipython().display_formatter.format(fractions.Fraction(1, 2))[0]['text/html'] == '<b>1/2</b>'",
    ),
    _p("ipython_shell", "stdlib", "is_ip = get_ipython()", "is_ip is get_ipython()"),
    _p("namespace", "stdlib", "ns_g = globals()", "ns_g is globals() and ns_g['ns_g'] is ns_g"),
    _p(
        "total_ordering",
        "stdlib",
        "import functools\n@functools.total_ordering\nclass ToV:\n    def __init__(self, v):\n        self.v = v\n"
        "    def __eq__(self, o):\n        return self.v == o.v\n    def __lt__(self, o):\n        return self.v < o.v\n"
        "to_a, to_b = ToV(1), ToV(2)",
        "to_a < to_b and to_b >= to_a",
    ),
    _p(
        "cached_property",
        "stdlib",
        "import functools\nclass CpBox:\n    def __init__(self):\n        self.calls = 0\n    @functools.cached_property\n"
        "    def val(self):\n        self.calls += 1\n        return 42\ncp_b = CpBox()\ncp_b.val",
        "cp_b.val == 42 and cp_b.calls == 1",
    ),
    _p(
        "itertools",
        "stdlib",
        "import itertools\nit_l = list(itertools.combinations('abc', 2))",
        "it_l == [('a', 'b'), ('a', 'c'), ('b', 'c')]",
    ),
    _p(
        "namedtuple",
        "stdlib",
        "import collections\nNtP = collections.namedtuple('NtP', 'x y')\nnt_p = NtP(1, 2)",
        "nt_p.x == 1 and isinstance(nt_p, NtP) and NtP.__new__.__defaults__ is None and NtP._field_defaults == {}",
    ),
    _p(
        "NamedTuple",
        "stdlib",
        "from typing import NamedTuple\nclass NtRow(NamedTuple):\n    a: int\n    b: str = 'z'\nnt_r = NtRow(1)",
        "nt_r == (1, 'z') and isinstance(nt_r, NtRow) and nt_r.b == 'z' and NtRow.__new__.__defaults__ == ('z',)",
    ),
    _p(
        "NamedTuple_methods",
        "stdlib",
        'from typing import NamedTuple\nclass NtmPoint(NamedTuple):\n    """A point."""\n    x: int\n    y: int = 0\n'
        "    def norm(self):\n        return abs(self.x) + abs(self.y)\n    @property\n    def flipped(self):\n"
        "        return NtmPoint(self.y, self.x)\nntm_p = NtmPoint(3, -4)",
        "ntm_p.norm() == 7 and ntm_p.flipped == (-4, 3) and NtmPoint.__doc__ == 'A point.' and NtmPoint(1).y == 0",
    ),
    _p(
        "namedtuple_defaults",
        "stdlib",
        "import collections, inspect\nNdP = collections.namedtuple('NdP', 'x y z', defaults=(0, None))\nnd_p = NdP(1)",
        "NdP.__new__.__defaults__ == (0, None) and str(inspect.signature(NdP)) == '(x, y=0, z=None)'"
        " and nd_p == NdP(1, 0, None) and isinstance(nd_p, NdP) and NdP._field_defaults == {'y': 0, 'z': None}",
    ),
    _p(
        "namedtuple_module",
        "stdlib",
        "import collections\nNmQ = collections.namedtuple('NmQ', 'a b', module='geo')\nnm_q = NmQ(1, 2)",
        "NmQ.__module__ == 'geo' and NmQ.__new__.__defaults__ is None and repr(nm_q) == 'NmQ(a=1, b=2)'"
        " and isinstance(nm_q, NmQ)",
    ),
    _p(
        "namedtuple_renamed",
        "stdlib",
        "import collections\nNrRow = collections.namedtuple('NrRow', ['id', 'class', 'id'], rename=True)\nnr_r = NrRow(1, 2, 3)",
        "NrRow._fields == ('id', '_1', '_2') and nr_r._1 == 2 and isinstance(nr_r, NrRow)"
        " and repr(nr_r) == 'NrRow(id=1, _1=2, _2=3)'",
    ),
    _p(
        "defaultdict",
        "stdlib",
        "import collections\ndd_d = collections.defaultdict(lambda: [0])\ndd_d['a'].append(1)",
        "dd_d['a'] == [0, 1] and dd_d['new'] == [0]",
    ),
    _p(
        "counter",
        "stdlib",
        "import collections\nco_c = collections.Counter('abracadabra')",
        "co_c.most_common(1) == [('a', 5)]",
    ),
    _p(
        "ordereddict",
        "stdlib",
        "import collections\nod_d = collections.OrderedDict([('b', 1), ('a', 2)])",
        "list(od_d) == ['b', 'a']",
    ),
    _p(  # the base's pickling called the subclass with the base's arguments
        "mapping_subclass_init",
        "stdlib",
        "import collections\nclass MsiLRU(collections.OrderedDict):\n    def __init__(self, capacity):\n"
        "        super().__init__()\n        self.capacity = capacity\n    def __setitem__(self, key, value):\n"
        "        super().__setitem__(key, value)\n        if len(self) > self.capacity:\n"
        "            self.popitem(last=False)\nclass MsiTally(collections.Counter):\n    def __init__(self, label, *a):\n"
        "        super().__init__(*a)\n        self.label = label\nmsi_cache = MsiLRU(2)\nfor _msi_k in 'abc':\n"
        "    msi_cache[_msi_k] = _msi_k.upper()\ndel _msi_k\nmsi_tally = MsiTally('letters', 'aab')",
        "list(msi_cache.items()) == [('b', 'B'), ('c', 'C')] and msi_cache.capacity == 2 and msi_tally['a'] == 2"
        " and msi_tally.label == 'letters' and (msi_cache.__setitem__('d', 'D'), list(msi_cache))[1] == ['c', 'd']",
    ),
    _p(
        "ordereddict_view",
        "stdlib",
        "import collections\nov_d = collections.OrderedDict(a=1)\nov_keys = ov_d.keys()\nov_items = ov_d.items()",
        "(ov_d.__setitem__('z', 2), ov_d.move_to_end('a'), list(ov_keys))[2] == ['z', 'a'] and ('a', 1) in ov_items"
        " and type(ov_keys).__name__ == 'odict_keys'",
    ),
    _p(
        "deque",
        "stdlib",
        "import collections\ndq_q = collections.deque(range(5), maxlen=3)",
        "list(dq_q) == [2, 3, 4] and dq_q.maxlen == 3",
    ),
    _p(
        "chainmap",
        "stdlib",
        "import collections\ncm_a = {'x': 1}\ncm_m = collections.ChainMap({'y': 2}, cm_a)",
        "cm_m['x'] == 1 and cm_m['y'] == 2 and cm_m.maps[1] is cm_a",
    ),
    _p(
        "enum",
        "stdlib",
        "import enum\nclass EnColor(enum.Enum):\n    RED = 1\n    GREEN = 2\nen_c = EnColor.RED",
        "EnColor(1) is EnColor.RED and en_c is EnColor.RED and en_c.name == 'RED'",
    ),
    _p(
        "enum_method_global",
        "plain",
        "import enum\nEmg_SCALE = 2\nclass EmgColor(enum.Enum):\n    RED = 1\n    def scaled(self):\n"
        "        return self.value * Emg_SCALE\nemg_red = EmgColor.RED",
        "(globals().__setitem__('Emg_SCALE', 7), emg_red.scaled())[1] == 7 and emg_red is EmgColor.RED",
    ),
    _p(
        "annotation_objects",
        "plain",
        "class AoRange:\n    def __init__(self, lo, hi):\n        self.lo, self.hi = lo, hi\nao_pct = AoRange(0, 100)\n"
        "def ao_clip(x: ao_pct) -> ao_pct:\n    return x",
        "ao_clip.__annotations__['x'] is ao_pct and ao_clip.__annotations__['return'] is ao_pct",
    ),
    _p(
        "set_name_fields",
        "plain",
        "class SnField:\n    def __set_name__(self, owner, name):\n        self.name = name\n"
        "        owner.fields = getattr(owner, 'fields', ()) + (name,)\nclass SnRow:\n    a = SnField()\n    b = SnField()",
        "SnRow.fields == ('a', 'b') and SnRow.__dict__['b'].name == 'b'",
    ),
    _p(
        "enum_member_attributes",
        "stdlib",
        "import enum\nclass EmPlanet(enum.Enum):\n    MERCURY = (3.303e23, 2.4397e6)\n    EARTH = (5.976e24, 6.37814e6)\n"
        "    def __init__(self, mass, radius):\n        self.mass, self.radius = mass, radius\n"
        "    @property\n    def gravity(self):\n        return 6.673e-11 * self.mass / (self.radius * self.radius)\n"
        "em_home = EmPlanet.EARTH\nEmPlanet.MERCURY.note = 'hot'",
        "em_home is EmPlanet.EARTH and em_home.mass == 5.976e24 and round(em_home.gravity, 2) == 9.8"
        " and EmPlanet.MERCURY.note == 'hot'",
    ),
    _p(
        "intenum",
        "stdlib",
        "import enum\nclass IeLevel(enum.IntEnum):\n    LOW = 1\n    HIGH = 2\nie_l = IeLevel.HIGH",
        "ie_l == 2 and ie_l is IeLevel(2)",
    ),
    _p(
        "flag",
        "stdlib",
        "import enum\nclass FlPerm(enum.Flag):\n    R = 4\n    W = 2\nfl_p = FlPerm.R | FlPerm.W",
        "FlPerm.R in fl_p and fl_p == FlPerm.R | FlPerm.W",
    ),
    _p(  # Python 3.11: a function made a member with ``enum.member``, a constant kept out with ``enum.nonmember``
        "enum_function_member",
        "stdlib",
        "import enum\nclass EfmOp(enum.Enum):\n    ADD = 1\n    limit = enum.nonmember(10)\n    @enum.member\n"
        "    def twice(x):\n        return 2 * x\nefm_add = EfmOp.ADD",
        "[m.name for m in EfmOp] == ['ADD', 'twice'] and EfmOp.twice.value(4) == 8 and EfmOp.limit == 10"
        " and efm_add is EfmOp.ADD",
    ),
    _p(  # the documentation's Coordinate: members made by a __new__ of the class's own; a dataclass mixed in
        "enum_own_new",
        "stdlib",
        "import dataclasses, enum\nclass EonCoord(bytes, enum.Enum):\n    def __new__(cls, value, label, unit):\n"
        "        obj = bytes.__new__(cls, [value])\n        obj._value_ = value\n        obj.label = label\n"
        "        obj.unit = unit\n        return obj\n    PX = (0, 'P.X', 'km')\n    VY = (3, 'V.Y', 'km/s')\n"
        "@dataclasses.dataclass(frozen=True)\nclass EonBody:\n    mass: float\n    radius: float\n"
        "class EonPlanet(EonBody, enum.Enum):\n    EARTH = 5.97, 6371.0\n    MARS = 0.642, 3389.5\n"
        "eon_vy = EonCoord.VY\neon_earth = EonPlanet.EARTH",
        "eon_vy is EonCoord(3) and eon_vy.label == 'V.Y' and bytes(eon_vy) == b'\\x03' and eon_earth.radius == 6371.0"
        " and EonPlanet.MARS.mass == 0.642 and eon_earth is EonPlanet['EARTH']",
    ),
    _p(
        "enum_aliases",
        "stdlib",
        "import enum\nclass EaColor(enum.Enum):\n    RED = 1\n    CRIMSON = 1\nclass EaPerm(enum.Flag):\n    R = 1\n"
        "    W = 2\n    RW = 3\nea_p = EaPerm.RW\nea_c = EaColor.CRIMSON",
        "EaColor['CRIMSON'] is EaColor.RED is ea_c and list(EaColor.__members__) == ['RED', 'CRIMSON']"
        " and repr(ea_p) == '<EaPerm.RW: 3>' and ea_p is EaPerm.R | EaPerm.W"
        " and list(EaPerm.__members__) == ['R', 'W', 'RW']",
    ),
    _p(
        "dataclass",
        "stdlib",
        "import dataclasses\n@dataclasses.dataclass\nclass DcItem:\n    name: str\n    tags: list = dataclasses.field(default_factory=list)\n"
        "dc_i = DcItem('a')\ndc_i.tags.append(1)",
        "dc_i == DcItem('a', [1]) and DcItem('b').tags == []",
    ),
    _p(
        "frozen_dataclass",
        "stdlib",
        "import dataclasses\n@dataclasses.dataclass(frozen=True, order=True)\nclass FdPt:\n    x: int\n    y: int\n"
        "fd_s = {FdPt(1, 2)}",
        "FdPt(1, 2) in fd_s and FdPt(0, 5) < FdPt(1, 0)",
    ),
    _p(
        "slots_dataclass",
        "stdlib",
        "import dataclasses\n@dataclasses.dataclass(slots=True)\nclass SdP:\n    x: int\nsd_p = SdP(3)",
        "sd_p.x == 3 and not hasattr(sd_p, '__dict__') and isinstance(sd_p, SdP)",
    ),
    _p(
        "cmp_to_key",
        "stdlib",
        "import functools\ndef ck_desc(a, b):\n    return b - a\nck_key = functools.cmp_to_key(ck_desc)\nck_three = ck_key(3)",
        "sorted([1, 3, 2], key=ck_key) == [3, 2, 1] and ck_key(5) < ck_three",
    ),
    _p(
        "held_in_c",
        "stdlib",
        "import xml.etree.ElementTree as ET\nhc_root = ET.fromstring('<a><b k=\"1\">t</b></a>')\nhc_b = hc_root[0]\n"
        "hc_rows = [1, 2, 3]\nhc_cursor = iter(hc_rows)\nnext(hc_cursor)",
        "hc_root[0] is hc_b and hc_b.get('k') == '1' and (hc_rows.__setitem__(1, 20) or next(hc_cursor) == 20)",
    ),
    _p(  # ctypes makes ``c_double * 3`` and ``POINTER(c_double)`` as classes of the module that asks: the notebook
        "ctypes_arrays",
        "stdlib",
        "import ctypes\ncta_a = (ctypes.c_double * 3)(1.0, 2.0, 3.0)\ncta_grid = ((ctypes.c_int * 2) * 2)()\n"
        "cta_grid[1][0] = 5\ncta_ptr = ctypes.POINTER(ctypes.c_double)\ncta_i = ctypes.c_int(7)",
        "list(cta_a) == [1.0, 2.0, 3.0] and type(cta_a) is ctypes.c_double * 3 and cta_grid[1][0] == 5"
        " and cta_ptr is ctypes.POINTER(ctypes.c_double) and ctypes.cast(cta_a, cta_ptr)[2] == 3.0 and cta_i.value == 7",
    ),
    _p(
        "struct",
        "stdlib",
        "import struct\nst_rec = struct.Struct('<iH')",
        "st_rec.unpack(st_rec.pack(5, 2)) == (5, 2) and st_rec.size == 6",
    ),
    _p(
        "type_variables",
        "stdlib",
        "from typing import Generic, NewType, TypeVar\nTvT = TypeVar('TvT', bound=float)\nTvId = NewType('TvId', int)\n"
        "class TvBox(Generic[TvT]):\n    def __init__(self, v: TvT):\n        self.v = v\n"
        "tv_box = TvBox[float](2.5)\ntv_ids = list[TvId]",
        "TvBox.__parameters__ == (TvT,) and TvT.__bound__ is float and tv_box.v == 2.5 and TvId(3) == 3"
        " and tv_ids.__args__ == (TvId,)",
    ),
    _p(  # a TypedDict's only base is dict, which its metaclass refuses when the class is made again with it
        "typed_dict",
        "stdlib",
        "import typing\nclass TydRow(typing.TypedDict, total=False):\n    a: int\n    b: typing.Required[str]\n"
        "class TydWide(TydRow):\n    c: list\nTydPoint = typing.TypedDict('TydPoint', {'x': int, 'y': int})\n"
        "tyd_r = TydWide(a=1, b='x', c=[])",
        "TydWide.__required_keys__ == {'b', 'c'} and TydWide.__optional_keys__ == {'a'} and typing.is_typeddict(TydPoint)"
        " and TydPoint(x=1, y=2) == {'x': 1, 'y': 2} and TydPoint.__required_keys__ == {'x', 'y'}"
        " and typing.get_type_hints(TydWide)['c'] is list and tyd_r == {'a': 1, 'b': 'x', 'c': []}",
    ),
    _p(
        "wrapt_decorator",
        "stdlib",
        "import wrapt\nwd_calls = []\n@wrapt.decorator\ndef wd_logged(wrapped, instance, args, kwargs):\n"
        "    wd_calls.append(wrapped.__name__)\n    return wrapped(*args, **kwargs)\n@wd_logged\ndef wd_add(a, b):\n"
        "    return a + b\n@wrapt.decorator(enabled=False)\ndef wd_off(wrapped, instance, args, kwargs):\n"
        "    return 'wrapped'\nclass WdK:\n    @wd_logged\n    def twice(self, x):\n        return 2 * x\nwd_k = WdK()",
        "wd_add(1, 2) == 3 and wd_k.twice(2) == 4 and wd_calls[-2:] == ['wd_add', 'twice']"
        " and wd_logged(len)('ab') == 2 and wd_calls[-1] == 'len' and wd_off(len)('abc') == 3",
    ),
    _p(
        "re_match",
        "stdlib",
        "import re\nrm_text = 'a1 b c3 d45'\nrm_search = re.compile(r'(\\d+)').search(rm_text, 3)\n"
        "rm_third = list(re.finditer(r'(?P<letter>[a-z])(\\d*)', rm_text))[2]\nrm_full = re.fullmatch(r'a|ab', 'ab')",
        "rm_search.group(1) == '3' and rm_search.pos == 3 and rm_third.span() == (5, 7) and rm_third.pos == 0"
        " and rm_third['letter'] == 'c' and rm_full.group() == 'ab'",
    ),
    _p(
        "regex",
        "stdlib",
        "import re\nre_p = re.compile(r'(\\d+)-(\\w+)', re.I)",
        "re_p.match('12-ab').groups() == ('12', 'ab') and re_p.flags & re.I",
    ),
    _p(
        "pathlib",
        "stdlib",
        "import pathlib\npl_p = pathlib.Path('/tmp/x/y.csv')",
        "pl_p.suffix == '.csv' and pl_p.parent.name == 'x'",
    ),
    _p(
        "closed_files",
        "stdlib",
        "import io, os, tempfile\ncf_dir = tempfile.mkdtemp(prefix='jupyter-ckpt-corpus-')\n"
        "cf_x = os.path.join(cf_dir, 'closed.bin')\n"
        "with open(os.path.join(cf_dir, 'closed.csv'), 'w') as cf_w:\n    cf_w.write('a,b\\n1,2\\n')\n"
        "with open(os.path.join(cf_dir, 'closed.txt'), 'w+') as cf_p:\n    cf_p.write('1234')\n"
        "with open(cf_x, 'xb') as cf_xb:\n    cf_xb.write(b'12')",
        "[os.path.getsize(f.name) for f in (cf_w, cf_p, cf_xb)] == [8, 4, 2] and all(f.closed for f in (cf_w, cf_p, cf_xb))"
        " and [f.mode for f in (cf_w, cf_p, cf_xb)] == ['w', 'w+', 'xb'] and type(cf_xb) is io.BufferedWriter"
        " and cf_xb.name == cf_x",
    ),
    _p(  # read line by line: each comes back reopened on its path where it was in the decompressed data
        "compressed_readers",
        "stdlib",
        "import bz2, gzip, lzma, os, tempfile\ncr_dir = tempfile.mkdtemp(prefix='jupyter-ckpt-corpus-')\n"
        "cr_rows = ''.join(f'row {i},caf\u00e9\\n' for i in range(3000))\n"
        "for _cr_m, _cr_e in ((gzip, 'gz'), (bz2, 'bz2'), (lzma, 'xz')):\n"
        "    with _cr_m.open(os.path.join(cr_dir, 'rows.csv.' + _cr_e), 'wt', encoding='latin-1') as cr_w:\n"
        "        cr_w.write(cr_rows)\ndel _cr_m, _cr_e\n"
        "cr_gz = gzip.open(os.path.join(cr_dir, 'rows.csv.gz'), 'rt', encoding='latin-1', errors='replace')\n"
        "cr_gzb = gzip.open(os.path.join(cr_dir, 'rows.csv.gz'))\n"
        "cr_bz = bz2.open(os.path.join(cr_dir, 'rows.csv.bz2'), 'rt', encoding='latin-1')\n"
        "cr_xz = lzma.open(os.path.join(cr_dir, 'rows.csv.xz'))\n"
        "cr_seen = [cr_gz.readline(), cr_gzb.readline(), cr_bz.read(2500), cr_xz.read(40000)]",
        "[cr_gz.readline(), cr_gzb.readline(), cr_bz.readline(), cr_xz.readline()]"
        " == ['row 1,caf\u00e9\\n', b'row 1,caf\\xe9\\n', 'f\u00e9\\n', b'36,caf\\xe9\\n']"
        " and (cr_gz.encoding, cr_gz.errors, cr_bz.encoding) == ('latin-1', 'replace', 'latin-1')"
        " and type(cr_gzb) is gzip.GzipFile and type(cr_xz) is lzma.LZMAFile and type(cr_bz.buffer) is bz2.BZ2File"
        " and cr_gzb.name == cr_gz.buffer.name == os.path.join(cr_dir, 'rows.csv.gz')"
        " and cr_w.closed and type(cr_w.buffer) is lzma.LZMAFile",
    ),
    _p(
        "zoneinfo",
        "stdlib",
        "import datetime, zoneinfo\nzi_t = datetime.datetime(2024, 3, 31, 2, 30, tzinfo=zoneinfo.ZoneInfo('UTC'))",
        "zi_t.utcoffset() == datetime.timedelta(0) and zi_t.tzinfo.key == 'UTC'",
    ),
    _p("decimal", "stdlib", "import decimal\nde_x = decimal.Decimal('1.10')", "de_x * 3 == decimal.Decimal('3.30')"),
    _p("fractions", "stdlib", "import fractions\nfr_x = fractions.Fraction(1, 3)", "fr_x * 3 == 1"),
    _p(
        "from_import_stdlib",
        "stdlib",
        "import logging, os, random, sys\nfrom os import environ as fis_environ\nfrom random import shuffle as fis_shuffle\n"
        "fis_out = sys.stdout\nfis_root = logging.getLogger()",
        "fis_environ is os.environ and fis_shuffle.__self__ is random._inst and fis_out is sys.stdout"
        " and fis_root is logging.root",
    ),
    _p(
        "operator_objects",
        "stdlib",
        "import functools, operator\noo_ig = operator.itemgetter(1, 0)\noo_ag = operator.attrgetter('real', 'imag')\n"
        "oo_mc = operator.methodcaller('split', ',', maxsplit=1)\noo_sum = functools.reduce(operator.add, [1, 2, 3])\n"
        "oo_prod = functools.partial(functools.reduce, operator.mul)",
        "oo_ig('ab') == ('b', 'a') and oo_ag(1 + 2j) == (1.0, 2.0) and oo_mc('a,b,c') == ['a', 'b,c'] and oo_sum == 6"
        " and oo_prod([2, 3]) == 6",
    ),
    _p(
        "template_userdict",
        "stdlib",
        "import collections, re, string\nrtu_p = re.compile(r'^a.b$', re.M | re.S | re.I)\n"
        "rtu_t = string.Template('$who likes $what')\nclass RtuLower(collections.UserDict):\n"
        "    def __setitem__(self, k, v):\n        super().__setitem__(k.lower(), v)\nrtu_d = RtuLower(A=1)",
        "rtu_p.flags & re.M and rtu_p.flags & re.S and rtu_p.findall('x\\nA\\nB') == ['A\\nB']"
        " and rtu_t.substitute(who='x', what='y') == 'x likes y' and rtu_d.data == {'a': 1}"
        " and (rtu_d.__setitem__('Q', 2), rtu_d['q'])[1] == 2 and type(rtu_d) is RtuLower",
    ),
    _p(
        "value_types",
        "stdlib",
        "import datetime, ipaddress, uuid\nsv_u = uuid.UUID('12345678-1234-5678-1234-567812345678')\n"
        "sv_ip = ipaddress.ip_address('10.0.0.1')\nsv_net = ipaddress.ip_network('10.0.0.0/24')\n"
        "sv_t = datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))",
        "sv_u.hex == '12345678123456781234567812345678' and sv_ip in sv_net and sv_t.utcoffset() == datetime.timedelta(hours=2)"
        " and sv_t.astimezone(datetime.timezone.utc).hour == 10",
    ),
    _p(
        "cache_method",
        "stdlib",
        "import functools\nclass FcmGrid:\n    def __init__(self, n):\n        self.n = n\n"
        "    @functools.cache\n    def total(self):\n        return sum(range(self.n))\n"
        "    def __hash__(self):\n        return hash(self.n)\nfcm_g = FcmGrid(10)\nfcm_g.total()\n",
        "fcm_g.total() == 45 and FcmGrid(4).total() == 6 and hasattr(FcmGrid.total, 'cache_info')",
    ),
    _p(
        "contextmanager",
        "stdlib",
        "import contextlib\nccm_log = []\n@contextlib.contextmanager\ndef ccm_tag(name):\n"
        "    ccm_log.append('in ' + name)\n    yield name.upper()\n    ccm_log.append('out ' + name)\n"
        "ccm_held = ccm_tag('held')\n",
        "(lambda cm: (cm.__enter__(), cm.__exit__(None, None, None)))(ccm_tag('a')) == ('A', False) and ccm_log[-2:] == ['in a', 'out a'] and ccm_held.__enter__() == 'HELD'",
    ),
    _p(
        "zoneinfo_local",
        "stdlib",
        "import datetime, zoneinfo\nzil_tz = zoneinfo.ZoneInfo('Europe/Paris')\n"
        "zil_t = datetime.datetime(2024, 3, 31, 3, 30, tzinfo=zil_tz)\n"
        "zil_fold = datetime.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=zil_tz)\n",
        "zil_t.tzinfo is zil_tz is zoneinfo.ZoneInfo('Europe/Paris') and zil_t.utcoffset() == datetime.timedelta(hours=2) and zil_fold.fold == 1 and zil_fold.utcoffset() == datetime.timedelta(hours=1)",
    ),
    _p(
        "path_subclass",
        "stdlib",
        "import pathlib\nclass PthData(type(pathlib.Path())):\n    def rows(self):\n"
        "        return self.stem.upper()\npth_p = PthData('/tmp/pth/data.csv')\n"
        "pth_q = pth_p.with_suffix('.parquet')\n",
        "type(pth_p) is PthData and pth_p.rows() == 'DATA' and type(pth_q) is PthData and str(pth_q) == '/tmp/pth/data.parquet'",
    ),
    _p(
        "decimal_contexts",
        "stdlib",
        "import decimal\n"
        "dcx_ctx = decimal.Context(prec=4, rounding=decimal.ROUND_DOWN, traps=[decimal.Inexact])\n"
        "with decimal.localcontext() as _dcx_local:\n    _dcx_local.prec = 5\n"
        "    dcx_x = decimal.Decimal(1) / 7\n",
        "dcx_ctx.prec == 4 and dcx_ctx.rounding == decimal.ROUND_DOWN and dcx_ctx.traps[decimal.Inexact] and str(dcx_x) == '0.14286' and dcx_ctx.divide(decimal.Decimal(1), decimal.Decimal(8)) == decimal.Decimal('0.125')",
    ),
    _p(
        "dataclass_factory",
        "stdlib",
        "import dataclasses\ndef bdf_default():\n    return ['seed']\n@dataclasses.dataclass\nclass BdfRun:\n"
        "    tags: list = dataclasses.field(default_factory=bdf_default)\nbdf_r = BdfRun()\n",
        "BdfRun().tags == ['seed'] and bdf_r.tags == ['seed'] and BdfRun.__dataclass_fields__['tags'].default_factory is bdf_default",
    ),
    _p(
        "enum_auto",
        "stdlib",
        "import enum\nclass BeaColor(enum.Enum):\n"
        "    def _generate_next_value_(name, start, count, last_values):\n        return name.lower()\n"
        "    RED = enum.auto()\n    BLUE = enum.auto()\nbea_c = BeaColor.BLUE\n",
        "bea_c.value == 'blue' and bea_c is BeaColor('blue')",
    ),
    _p(
        "queue_event",
        "stdlib",
        "import queue, threading\nbqe_q = queue.Queue()\nbqe_q.put(1)\nbqe_q.put({'k': 2})\n"
        "bqe_e = threading.Event()\nbqe_e.set()\nbqe_pq = queue.PriorityQueue()\nbqe_pq.put((2, 'b'))\n"
        "bqe_pq.put((1, 'a'))\n",
        "bqe_q.qsize() == 2 and bqe_q.get_nowait() == 1 and bqe_e.is_set() and bqe_pq.get_nowait() == (1, 'a')",
    ),
    _p(
        "partialmethod_classmethod_cache",
        "stdlib",
        "import functools\nclass BpmCell:\n    def __init__(self):\n        self.alive = False\n"
        "    def set_state(self, state):\n        self.alive = state\n"
        "    set_alive = functools.partialmethod(set_state, True)\n    @classmethod\n    @functools.cache\n"
        "    def table(cls, n):\n        return list(range(n))\nbpm_c = BpmCell()\n",
        "(bpm_c.set_alive(), bpm_c.alive)[1] is True and BpmCell.table(3) == [0, 1, 2]",
    ),
    _p(
        "simple_namespace_encoder",
        "stdlib",
        "import json, types\nbsn_cfg = types.SimpleNamespace(lr=0.1, inner=types.SimpleNamespace(k=[1]))\n"
        "class BsnEnc(json.JSONEncoder):\n    def default(self, o):\n        return vars(o)\n"
        "bsn_enc = BsnEnc(indent=None)\n",
        'bsn_cfg.inner.k == [1] and bsn_enc.encode(bsn_cfg) == \'{"lr": 0.1, "inner": {"k": [1]}}\'',
    ),
    _p(
        "logger_adapter",
        "stdlib",
        "import logging\nbla_log = logging.getLogger('bla_app')\nbla_ad = logging.LoggerAdapter(bla_log, {'run': 7})\n",
        "bla_ad.logger is bla_log and bla_ad.extra == {'run': 7} and bla_log is logging.getLogger('bla_app')",
    ),
    _p(
        "frozen_post_init",
        "stdlib",
        "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass CfpBox:\n    w: float\n    h: float\n"
        "    area: float = dataclasses.field(init=False)\n    def __post_init__(self):\n"
        "        object.__setattr__(self, 'area', self.w * self.h)\ncfp_b = CfpBox(2, 3)\n",
        "cfp_b.area == 6 and CfpBox(1, 4).area == 4 and hash(cfp_b) == hash(CfpBox(2, 3))",
    ),
    _p(
        "recursive_dataclass",
        "stdlib",
        "import dataclasses\n@dataclasses.dataclass(eq=False)\nclass CrdNode:\n    name: str\n"
        "    parent: 'CrdNode | None' = None\n    children: list = dataclasses.field(default_factory=list)\n"
        "crd_root = CrdNode('root')\ncrd_kid = CrdNode('kid', crd_root)\ncrd_root.children.append(crd_kid)\n",
        "crd_root.children[0] is crd_kid and crd_kid.parent is crd_root",
    ),
    _p(
        "singledispatchmethod_classmethod",
        "stdlib",
        "import functools\nclass CsmParse:\n    @functools.singledispatchmethod\n    @classmethod\n"
        "    def parse(cls, x):\n        return 'any'\n    @parse.register\n    @classmethod\n"
        "    def _(cls, x: int):\n        return 'int'\n",
        "CsmParse.parse(1) == 'int' and CsmParse.parse('s') == 'any'",
    ),
    _p(
        "wraps_method_stack",
        "stdlib",
        "import functools\ndef cwm_trace(f):\n    @functools.wraps(f)\n    def inner(*a, **k):\n"
        "        return ('traced', f(*a, **k))\n    return inner\nclass CwmApi:\n    @staticmethod\n"
        "    @cwm_trace\n    def ping():\n        return 'pong'\n    @classmethod\n    @cwm_trace\n"
        "    def make(cls):\n        return cls.__name__\n    @property\n    @cwm_trace\n    def me(self):\n"
        "        return 1\n",
        "CwmApi.ping() == ('traced', 'pong') and CwmApi.make() == ('traced', 'CwmApi') and CwmApi().me == ('traced', 1)",
    ),
    _p(
        "lru_cache_typed_method",
        "stdlib",
        "import functools\nclass CltMath:\n    @functools.lru_cache(maxsize=8, typed=True)\n"
        "    def sq(self, x):\n        return x * x\nclt_m = CltMath()\nclt_m.sq(3)\n",
        "clt_m.sq(4) == 16 and CltMath.sq.cache_parameters() == {'maxsize': 8, 'typed': True}",
    ),
    _p(
        "logging_level_name",
        "stdlib",
        "import logging\nlogging.addLevelName(25, 'NOTICE')\nlln_log = logging.getLogger('lln')\n",
        "logging.getLevelName(25) == 'NOTICE' and logging.getLevelName('NOTICE') == 25",
    ),
    _p(
        "dataclass_kw_only_match",
        "stdlib",
        "import dataclasses\n@dataclasses.dataclass\nclass DkmPt:\n    x: int\n    _: dataclasses.KW_ONLY\n"
        "    tag: str = 'p'\ndkm_p = DkmPt(1, tag='q')\ndef dkm_kind(o):\n    match o:\n"
        "        case DkmPt(x=1, tag=t):\n            return t\n    return None\n",
        "dkm_kind(dkm_p) == 'q' and DkmPt.__match_args__ == ('x',) and DkmPt(2).tag == 'p'",
    ),
    _p(
        "logging_logger_class",
        "stdlib",
        "import logging\nclass LlcLogger(logging.Logger):\n    def notice(self, msg):\n"
        "        self.log(25, msg)\nlogging.setLoggerClass(LlcLogger)\n"
        "llc_log = logging.getLogger('llc_app')\n",
        "type(llc_log) is LlcLogger and logging.getLoggerClass() is LlcLogger",
    ),
    # -- numpy ---------------------------------------------------------------------------------------
    _p(
        "array",
        "numpy",
        "import numpy as np\nar_a = np.arange(12.0).reshape(3, 4)",
        "ar_a.shape == (3, 4) and ar_a[2, 3] == 11.0",
    ),
    _p(
        "view",
        "numpy",
        "import numpy as np\nvw_a = np.arange(100.0)\nvw_v = vw_a[10:20]",
        "np.shares_memory(vw_a, vw_v) and (vw_v.__setitem__(0, -1.0) or vw_a[10] == -1.0)",
    ),
    _p(
        "read_only",
        "numpy",
        "import numpy as np\nro_base = np.arange(3)\nro_wide = np.broadcast_to(ro_base, (4, 3))\n"
        "ro_big = np.arange(100_000.0)\nro_big.flags.writeable = False",
        "not ro_wide.flags.writeable and np.shares_memory(ro_wide, ro_base) and ro_base.flags.writeable"
        " and not ro_big.flags.writeable and ro_big[-1] == 99_999.0",
    ),
    _p(
        "structured",
        "numpy",
        "import numpy as np\nst_a = np.array([(1, 2.5), (3, 4.5)], dtype=[('i', 'i4'), ('f', 'f8')])",
        "st_a['f'][1] == 4.5 and st_a.dtype.names == ('i', 'f')",
    ),
    _p(
        "array_subclass",
        "numpy",
        "import numpy as np\nclass AsTagged(np.ndarray):\n    def __new__(cls, values, unit):\n"
        "        made = np.asarray(values).view(cls)\n        made.unit = unit\n        return made\n"
        "    def __array_finalize__(self, obj):\n        self.unit = getattr(obj, 'unit', None)\n"
        "as_w = AsTagged([1.5, 2.0], 'kg')",
        "type(as_w) is AsTagged and as_w.unit == 'kg' and as_w.tolist() == [1.5, 2.0]",
    ),
    _p(
        "record_view",
        "numpy",
        "import numpy as np\nrv_t = np.array([(1, 2.5), (3, 4.5)], dtype=[('i', 'i4'), ('f', 'f8')])\n"
        "rv_r = rv_t.view(np.recarray)",
        "type(rv_r) is np.recarray and rv_r.base is rv_t and rv_r.f[1] == 4.5",
    ),
    _p(
        "frombuffer",
        "numpy",
        "import numpy as np, array\nfbf_raw = bytearray(range(8))\nfbf_a = np.frombuffer(fbf_raw, dtype=np.uint8)\n"
        "fbf_arr = array.array('d', [1.0, 2.0])\nfbf_na = np.frombuffer(fbf_arr)",
        "(fbf_a.__setitem__(0, 99), fbf_raw[0])[1] == 99 and (fbf_arr.__setitem__(1, 7.0), fbf_na[1])[1] == 7.0",
    ),
    _p(
        "matrix_view",
        "numpy",
        "import numpy as np\nmx_base = np.array([[1.0, 2.0], [3.0, 4.0]])\nmx_m = np.asmatrix(mx_base)\n"
        "mx_own = np.matrix([[5.0, 6.0], [7.0, 8.0]])\nmx_row = mx_own[1]",
        "type(mx_m) is np.matrix and mx_m.base is mx_base and (mx_m.__setitem__((0, 0), 9.0), mx_base[0, 0])[1] == 9.0"
        " and type(mx_row) is np.matrix and (mx_own.__setitem__((1, 1), -1.0), mx_row[0, 1])[1] == -1.0"
        " and (mx_m * mx_m)[1, 1] == 22.0",
    ),
    _p(
        "memoryview",
        "plain",
        "mv_data = bytearray(b'abcdef')\nmv_whole, mv_part = memoryview(mv_data), memoryview(mv_data)[2:4]",
        "type(mv_whole) is memoryview and mv_whole.obj is mv_data and bytes(mv_part) == b'cd' and not mv_part.readonly",
    ),
    _p(
        "memoryview_parts",
        "plain",
        "mp_data = bytearray(8)\nmp_shorts = memoryview(mp_data).cast('H')\nmp_tail = memoryview(mp_data)[6:]",
        "mp_shorts.obj is mp_data and mp_tail.obj is mp_data and mp_shorts.format == 'H'"
        " and (mp_shorts.__setitem__(0, 257), mp_tail.__setitem__(1, 9), bytes(mp_data))[2] == b'\\x01\\x01' + bytes(5) + b'\\t'",
    ),
    _p(
        "record_field",
        "numpy",
        "import numpy as np\nrf_r = np.rec.array([(1, 2.0), (3, 4.0)], names='a,b')\nrf_a = rf_r.a",
        "type(rf_r) is np.recarray and type(rf_a) is np.ndarray and np.shares_memory(rf_r, rf_a)"
        " and (rf_a.__setitem__(1, 7), int(rf_r.a[1]))[1] == 7",
    ),
    _p(
        "masked_hard",
        "numpy",
        "import numpy as np\nmh_a = np.ma.array([1, 2, 3], mask=[0, 1, 0], hard_mask=True)",
        "mh_a.hardmask and (mh_a.__setitem__(1, 9), bool(mh_a.mask[1]))[1]",
    ),
    _p(
        "masked",
        "numpy",
        "import numpy as np\nma_a = np.ma.masked_array([1, 2, 3], mask=[0, 1, 0])",
        "ma_a.sum() == 4 and bool(ma_a.mask[1])",
    ),
    _p(  # numpy's pickling copies a masked array's data and mask: a write through one no longer reached the other
        "masked_views",
        "numpy",
        "import numpy as np\nmav_base = np.arange(6.0)\nmav_m = np.ma.masked_array(mav_base, mask=mav_base > 3)\n"
        "mav_tail = mav_m[2:]\nmav_plain = np.ma.array([1.0, 2.0])",
        "(mav_m.__setitem__(2, -1.0), float(mav_tail[0]), mav_base[2])[1:] == (-1.0, -1.0)"
        " and np.shares_memory(mav_tail.mask, mav_m.mask) and mav_tail.mask.tolist() == [False, False, True, True]"
        " and mav_plain.mask is np.ma.nomask and mav_m.sum() == 3.0 and type(mav_tail) is np.ma.MaskedArray",
    ),
    _p(
        "memmap",
        "numpy",
        "import numpy as np, os, tempfile\nmm_path = os.path.join(tempfile.mkdtemp(prefix='jupyter-ckpt-corpus-'), 'memmap.bin')\n"
        "np.arange(10.0).tofile(mm_path)\n"
        "mm_a = np.memmap(mm_path, dtype=float, mode='r')\nmm_tail = mm_a[5:]",
        "float(mm_a[9]) == 9.0 and len(mm_a) == 10 and type(mm_a) is np.memmap and str(mm_a.filename) == mm_path"
        " and not mm_a.flags.writeable and np.shares_memory(mm_a, mm_tail) and type(mm_tail) is np.memmap",
    ),
    _p(  # maps the cells write through: the file holds the map's bytes again, writes and flush() reach it
        "memmap_written",
        "numpy",
        "import numpy as np, os, tempfile\nmrw_dir = tempfile.mkdtemp(prefix='jupyter-ckpt-corpus-')\n"
        "mrw_path = os.path.join(mrw_dir, 'rw.bin')\nmrw_a = np.memmap(mrw_path, dtype='f8', mode='w+', shape=(4,))\n"
        "mrw_a[:] = [1, 2, 3, 4]\nmrw_a.flush()\nmrw_b = np.memmap(mrw_path, dtype='f8', mode='r+', offset=8, shape=(2,))\n"
        "mrw_tail = mrw_a[2:]\nmrw_npy = np.lib.format.open_memmap(os.path.join(mrw_dir, 'f.npy'), mode='w+', dtype='i4',"
        " shape=(2, 3), fortran_order=True)\nmrw_npy[1, 2] = 7\nmrw_c = np.memmap(mrw_path, dtype='f8', mode='c')\n"
        "mrw_c[0] = -1.0",
        "type(mrw_a) is np.memmap and (mrw_a.mode, mrw_b.mode, mrw_c.mode) == ('w+', 'r+', 'c') and mrw_a.tolist() == [1, 2, 3, 4]"
        " and (mrw_b.__setitem__(0, 9.0), mrw_tail.__setitem__(1, 8.0), mrw_a.flush(), np.fromfile(mrw_path).tolist())[3]"
        " == [1, 9, 3, 8] and mrw_a[1] == 9.0 and np.shares_memory(mrw_a, mrw_tail) and type(mrw_tail) is np.memmap"
        " and np.load(os.path.join(mrw_dir, 'f.npy'))[1, 2] == 7 and mrw_npy.flags.f_contiguous and mrw_c[0] == -1.0"
        " and np.fromfile(mrw_path)[0] == 1.0",
    ),
    _p(
        "sliding_window",
        "numpy",
        "import numpy as np\nsw_a = np.arange(10.0)\nsw_w = np.lib.stride_tricks.sliding_window_view(sw_a, 3)",
        "sw_w.shape == (8, 3) and np.shares_memory(sw_w, sw_a) and sw_w[2, 2] == 4.0 and not sw_w.flags.writeable"
        " and (sw_a.__setitem__(4, -1.0) or sw_w[3, 1] == -1.0)",
    ),
    _p(
        "datetime64",
        "numpy",
        "import numpy as np\ndt_a = np.arange('2024-01', '2024-04', dtype='datetime64[M]')",
        "str(dt_a[2]) == '2024-03'",
    ),
    _p("zero_d", "numpy", "import numpy as np\nzd_a = np.array(3.5)", "zd_a.shape == () and float(zd_a) == 3.5"),
    _p(
        "fortran",
        "numpy",
        "import numpy as np\nfo_a = np.asfortranarray(np.arange(6).reshape(2, 3))",
        "fo_a.flags.f_contiguous and fo_a[1, 2] == 5",
    ),
    _p(
        "rng",
        "numpy",
        "import numpy as np\nrn_g = np.random.default_rng(7)\nrn_g.random()",
        "rn_g.random() == np.random.default_rng(7).random(2)[1]",
    ),
    _p(
        "object_array",
        "numpy",
        "import numpy as np\nclass OarNode:\n    pass\noar_shared = [1]\noar_a = np.empty(3, dtype=object)\n"
        "oar_a[:] = [OarNode(), oar_shared, 'x']",
        "isinstance(oar_a[0], OarNode) and oar_a[1] is oar_shared and oar_a[2] == 'x'",
    ),
    _p(  # numpy's pickling copies a view of an array of objects: a write through it no longer reached the array
        "object_array_views",
        "numpy",
        "import numpy as np\noav_rows = np.array([[{'k': 1}, 'a'], [None, 'b'], [3, 'c']], dtype=object)\n"
        "oav_first = oav_rows[:, 0]\noav_back = oav_rows[::-1]",
        "(oav_first.__setitem__(1, 'x'), oav_rows[1, 0])[1] == 'x' and oav_back[0, 1] == 'c'"
        " and (oav_rows.__setitem__((2, 1), 'z'), oav_back[0, 1])[1] == 'z' and np.shares_memory(oav_first, oav_rows)"
        " and oav_first[0] is oav_rows[0, 0] and oav_first[0] == {'k': 1}",
    ),
    _p(  # called once with ``otypes``, it holds the ufunc ``frompyfunc`` made of the function, which pickle refuses
        "vectorize",
        "numpy",
        "import numpy as np\ndef vz_f(a, b):\n    return a - b if a > b else a + b\nvz_v = np.vectorize(vz_f, otypes=[float])\n"
        "vz_out = vz_v([1, 4], 2)\nvz_c = np.vectorize(vz_f, cache=True, excluded={1})\nvz_c([5], 2)",
        "vz_v([1, 4], 2).tolist() == [3.0, 2.0] and vz_v.pyfunc is vz_f and vz_c([5, 1], 2).tolist() == [3, 3]"
        " and vz_c.excluded == {1} and vz_v.otypes == [np.dtype(float)]",
    ),
    _p(  # numpy pickles a ufunc by its name, which only numpy's own have
        "frompyfunc",
        "numpy",
        "import numpy as np\ndef fpf_f(a):\n    return a * 2\nfpf_u = np.frompyfunc(fpf_f, 1, 1)\n"
        "fpf_sum = np.frompyfunc(lambda a, b: a + b, 2, 1, identity=0)\nfpf_add = np.add",
        "fpf_u(np.array([1, 2])).tolist() == [2, 4] and fpf_sum.reduce(np.array([1, 2, 3])) == 6"
        " and fpf_sum.identity == 0 and fpf_u.nin == 1 and fpf_add is np.add",
    ),
    _p(
        "from_import_numpy",
        "numpy",
        "import numpy\nfrom numpy.random import rand as fin_rand",
        "fin_rand.__self__ is numpy.random.mtrand._rand and numpy.random.seed(0) is None"
        " and fin_rand() == (numpy.random.seed(0) or numpy.random.rand())",
    ),
    _p(
        "npz_files",
        "numpy",
        "import numpy as np, os, tempfile\nnzf_path = os.path.join(tempfile.gettempdir(), 'nzf.npz')\n"
        "np.savez(nzf_path, x=np.arange(3), y=np.ones(2))\nnzf_data = np.load(nzf_path)\n"
        "with np.load(nzf_path) as nzf_done:\n    nzf_y = nzf_done['y']",
        "nzf_data['x'].tolist() == [0, 1, 2] and nzf_data.files == ['x', 'y'] and nzf_done.zip is None"
        " and nzf_done.files == ['x', 'y'] and nzf_y.tolist() == [1.0, 1.0]",
    ),
    # -- pandas --------------------------------------------------------------------------------------
    _p(
        "frame_column",
        "pandas",
        "import pandas as pd\nfc_df = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\nfc_s = fc_df['b']",
        "fc_df.equals(pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})) and fc_s.tolist() == ['x', 'y']",
    ),
    _p(
        "pandas_copy_on_write",
        "pandas",
        "import pandas as pd\npc_raw = pd.DataFrame({'a': [1.0, -2.0, 3.0], 'b': [4.0, 5.0, -6.0]})\n"
        "pc_clean = pc_raw.rename(columns={'a': 'A'})\npc_s = pc_raw['a']\npc_idx = pc_raw.set_index('b')\n"
        "pc_sub = pc_raw[['a']]",
        "(pc_s.iloc.__setitem__(0, 99.0), pc_clean.iloc.__setitem__((1, 0), 0.0), pc_raw.iloc.__setitem__((1, 1), 50.0),"
        " pc_sub.iloc.__setitem__((2, 0), 7.0))"
        " and pc_raw['a'].tolist() == [1.0, -2.0, 3.0] and pc_idx.index.tolist() == [4.0, 5.0, -6.0]"
        " and pc_s.tolist() == [99.0, -2.0, 3.0] and pc_clean['A'].tolist() == [1.0, 0.0, 3.0]"
        " and pc_sub['a'].tolist() == [1.0, -2.0, 7.0] and pc_raw['b'].tolist() == [4.0, 50.0, -6.0]",
    ),
    _p(
        "categorical",
        "pandas",
        "import pandas as pd\nca_s = pd.Series(['a', 'b', 'a'], dtype='category')",
        "ca_s.cat.categories.tolist() == ['a', 'b'] and ca_s.cat.codes.tolist() == [0, 1, 0]",
    ),
    _p(
        "multiindex",
        "pandas",
        "import pandas as pd\nmi_df = pd.DataFrame({'v': [1, 2, 3, 4]}, index=pd.MultiIndex.from_product([['a', 'b'], [1, 2]]))",
        "mi_df.loc[('b', 2), 'v'] == 4 and mi_df.index.nlevels == 2",
    ),
    _p(
        "period",
        "pandas",
        "import pandas as pd\npe_i = pd.period_range('2024-01', periods=3, freq='M')",
        "str(pe_i[2]) == '2024-03'",
    ),
    _p(
        "interval", "pandas", "import pandas as pd\nin_i = pd.interval_range(0, 3)", "2.5 in in_i[2] and len(in_i) == 3"
    ),
    _p(
        "tz_aware",
        "pandas",
        "import pandas as pd\ntz_s = pd.Series(pd.date_range('2024-01-01', periods=3, tz='Europe/Paris'))",
        "str(tz_s.dt.tz) == 'Europe/Paris' and tz_s.iloc[2].day == 3",
    ),
    _p(
        "frame_objects",
        "pandas",
        "import pandas as pd\nclass FobItem:\n    def __init__(self, v):\n        self.v = v\n"
        "fob_df = pd.DataFrame({'item': [FobItem(1), FobItem(2)], 'n': [1, 2]})\nfob_first = fob_df['item'][0]\n"
        "fob_s = pd.Series([fob_first], index=pd.Index([FobItem(3)]))",
        "isinstance(fob_df['item'][0], FobItem) and fob_df['item'][0] is fob_first and fob_s.iloc[0] is fob_first"
        " and isinstance(fob_s.index[0], FobItem)",
    ),
    _p(
        "accessor",
        "pandas",
        "import pandas as pd\n@pd.api.extensions.register_dataframe_accessor('acc_geo')\nclass AccGeo:\n"
        "    def __init__(self, frame):\n        self._frame = frame\n    def center(self):\n"
        "        return float(self._frame['x'].mean())\nacc_df = pd.DataFrame({'x': [1.0, 3.0]})",
        "acc_df.acc_geo.center() == 2.0 and type(acc_df.acc_geo) is AccGeo",
    ),
    _p(
        "categorical_dtype_shared",
        "pandas",
        "import pandas as pd\ncdt_levels = pd.CategoricalDtype(['lo', 'mid', 'hi'], ordered=True)\n"
        "cdt_a = pd.Series(['lo', 'hi', 'mid'], dtype=cdt_levels)\ncdt_b = pd.Series(['mid', 'mid'], dtype=cdt_levels)",
        "cdt_a.dtype is cdt_levels and cdt_b.dtype is cdt_levels and (cdt_a < 'hi').tolist() == [True, False, True]"
        " and cdt_a.max() == 'hi'",
    ),
    _p(
        "pandas_scalars",
        "pandas",
        "import pandas as pd\npdsc_ts = pd.Timestamp('2024-03-01 12:00', tz='US/Eastern')\npdsc_td = pd.Timedelta('1 days 2 hours')\n"
        "pdsc_off = pd.DateOffset(months=1, days=2)\npdsc_bd = pd.offsets.BusinessDay(3)\npdsc_nat = pd.NaT",
        "pdsc_ts + pdsc_td == pd.Timestamp('2024-03-02 14:00', tz='US/Eastern')"
        " and pdsc_ts + pdsc_off == pd.Timestamp('2024-04-03 12:00', tz='US/Eastern') and pdsc_bd.n == 3"
        " and pdsc_nat is pd.NaT and str(pdsc_ts.tz) == 'US/Eastern'",
    ),
    _p(
        "nullable_frames",
        "pandas",
        "import pandas as pd\nnu_a = pd.DataFrame({'n': [1, None], 'ok': [True, None]}).convert_dtypes()\n"
        "nu_b = pd.DataFrame({'n': [2, 3]}).convert_dtypes()",
        "str(nu_a['n'].dtype) == str(nu_b['n'].dtype) == 'Int64' and nu_a['n'].dtype == nu_b['n'].dtype"
        " and str(pd.concat([nu_a, nu_b])['n'].dtype) == 'Int64' and nu_a['n'].isna().tolist() == [False, True]"
        " and nu_a['ok'].dtype == 'boolean' and (nu_b['n'] + 1).tolist() == [3, 4]",
    ),
    _p(
        "frame_attributes",
        "pandas",
        "import pandas as pd\nfat_train = pd.DataFrame({'a': [1, 2]})\nfat_train.name = 'train'\n"
        "fat_w = pd.Series([1.5], name='w')\nfat_w.unit = 'kg'",
        "fat_train.name == 'train' and fat_w.unit == 'kg' and fat_w.name == 'w' and fat_train['a'].sum() == 3",
    ),
    _p(
        "pandas_lazy_objects",
        "pandas",
        "import pandas as pd, numpy as np\n"
        "plo_df = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1.0, 2.0, 3.0]}, index=pd.date_range('2024-01-01', periods=3, freq='h'))\n"
        "plo_gb = plo_df.groupby('k')\nplo_roll = plo_df['v'].rolling(2)\n"
        "plo_res = plo_df['v'].resample('2h')\n"
        "plo_sty = plo_df.style.format({'v': '{:.1f}'}).highlight_max('v')\n",
        "plo_gb['v'].sum().to_dict() == {'a': 4.0, 'b': 2.0} and plo_roll.sum().tolist()[1:] == [3.0, 5.0] and plo_res.sum().tolist() == [3.0, 3.0] and '3.0' in plo_sty.to_html()",
    ),
    _p(
        "frame_attrs_flags",
        "pandas",
        "import pandas as pd\nbfa_df = pd.DataFrame({'a': [1, 2]})\nbfa_df.attrs['source'] = 'x.csv'\n"
        "bfa_ds = pd.DataFrame({'a': [1]}).set_flags(allows_duplicate_labels=False)\n",
        "bfa_df.attrs == {'source': 'x.csv'} and bfa_ds.flags.allows_duplicate_labels is False",
    ),
    _p(
        "extension_dtype_registered",
        "pandas",
        "import pandas as pd\nfrom pandas.api.extensions import register_extension_dtype, ExtensionDtype\n"
        "@register_extension_dtype\nclass RedUnit(ExtensionDtype):\n    name = 'red_unit'\n    type = float\n"
        "    @classmethod\n    def construct_array_type(cls):\n        return pd.arrays.FloatingArray\n",
        "pd.api.types.pandas_dtype('red_unit').__class__ is RedUnit",
    ),
    # -- scipy ---------------------------------------------------------------------------------------
    _p(
        "from_import_scipy",
        "scipy",
        "import scipy.stats\nfrom scipy.stats import norm as fisc_norm",
        "fisc_norm is scipy.stats.norm and round(fisc_norm.cdf(0), 2) == 0.5",
    ),
    _p(
        "sparse_shared",
        "scipy",
        "import numpy as np, scipy.sparse as sps\nsps_data = np.array([1.0, 2.0, 3.0])\n"
        "sps_m = sps.csr_matrix((sps_data, np.array([0, 2, 1]), np.array([0, 2, 3])), shape=(2, 3))\n"
        "sps_c = sps.coo_matrix((sps_data, (np.array([0, 1, 1]), np.array([0, 1, 2]))), shape=(2, 3))\n"
        "sps_arr = sps.csr_array(np.eye(3))",
        "np.shares_memory(sps_m.data, sps_data) and np.shares_memory(sps_c.data, sps_data) and sps_m.toarray()[0, 2] == 2.0"
        " and sps_c.toarray()[1, 2] == 3.0 and type(sps_arr) is sps.csr_array and sps_arr.sum() == 3.0",
    ),
    _p(
        "scipy_objects",
        "scipy",
        "import numpy as np, scipy.stats, scipy.interpolate, scipy.optimize\n"
        "sco_d = scipy.stats.norm(loc=2, scale=3)\n"
        "sco_i = scipy.interpolate.interp1d([0, 1, 2], [0, 10, 40])\n"
        "sco_s = scipy.interpolate.CubicSpline([0, 1, 2, 3], [0, 1, 8, 27])\ndef sco_f(v):\n"
        "    return (v[0] - 1) ** 2 + (v[1] + 2) ** 2\nsco_r = scipy.optimize.minimize(sco_f, [0.0, 0.0])\n"
        "sco_k = scipy.stats.gaussian_kde([1.0, 2.0, 2.5, 4.0])\n",
        "sco_d.cdf(2) == 0.5 and sco_d.std() == 3 and float(sco_i(1.5)) == 25.0 and abs(float(sco_s(2)) - 8) < 1e-9 and np.allclose(sco_r.x, [1, -2], atol=1e-4) and sco_r.success and sco_k(2.0)[0] > 0",
    ),
    _p(
        "scipy_tree_operator",
        "scipy",
        "import numpy as np, scipy.spatial, scipy.sparse.linalg\n"
        "bst_t = scipy.spatial.KDTree(np.arange(10.0).reshape(5, 2))\ndef bst_mv(v):\n    return 2 * v\n"
        "bst_op = scipy.sparse.linalg.LinearOperator((3, 3), matvec=bst_mv)\n",
        "bst_t.query([2.1, 3.1])[1] == 1 and (bst_op @ np.ones(3)).tolist() == [2.0, 2.0, 2.0]",
    ),
    # -- sympy ---------------------------------------------------------------------------------------
    _p(  # shapes of numbers JSON cannot hold, in the preview the background writer sends back as JSON
        "symbolic_shape",
        "sympy",
        "import numpy as np, sympy as sp\nss_n = sp.Symbol('ss_n')\nss_A = sp.MatrixSymbol('ss_A', 2, 2)\n"
        "ss_X = sp.MatrixSymbol('ss_X', ss_n, 3)\nss_I = sp.Identity(3)\nss_arr = sp.Array([[1, 2]])\n"
        "class SsGrid:\n    def __init__(self, coords):\n        self.shape = tuple(np.max(coords, axis=0) + 1)\n"
        "ss_g = SsGrid(np.array([[0, 1], [2, 3]]))",
        "ss_A.shape == (2, 2) and ss_X.shape == (ss_n, 3) and ss_I.shape == (3, 3) and ss_arr.tolist() == [[1, 2]]"
        " and ss_g.shape == (3, 4) and type(ss_g) is SsGrid",
    ),
    _p(
        "pydantic_generic",
        "pydantic",
        "from typing import Generic, TypeVar\nfrom pydantic import BaseModel\nPgT = TypeVar('PgT')\n"
        "class PgBox(BaseModel, Generic[PgT]):\n    item: PgT\npg_box = PgBox[int](item=1)",
        "isinstance(pg_box, PgBox[int]) and type(pg_box) is PgBox[int] and pg_box.item == 1",
    ),
    _p(
        "sympy_function",
        "sympy",
        "import sympy as sp\nsyf_x = sp.Symbol('syf_x')\nsyf_f = sp.Function('syf_f')\n"
        "syf_e = syf_f(syf_x) ** 2 + 1\nsyf_l = sp.lambdify(syf_x, sp.sin(syf_x) ** 2 + 1)\n",
        "syf_f(syf_x).func is syf_f and syf_e.atoms(syf_f) == {syf_f(syf_x)} and abs(syf_l(0.5) - 1.2298488470659578) < 1e-12 and syf_e.diff(syf_x) == 2 * syf_f(syf_x) * syf_f(syf_x).diff(syf_x)",
    ),
    _p(
        "sympy_objects",
        "sympy",
        "import sympy as sp\nbsy_x, bsy_y = sp.symbols('bsy_x bsy_y', positive=True)\n"
        "bsy_m = sp.Matrix([[bsy_x, 1], [0, bsy_y]])\nbsy_sol = sp.solve(sp.Eq(bsy_x ** 2, 4), bsy_x)\n"
        "bsy_p = sp.Poly(bsy_x ** 2 + 3 * bsy_x, bsy_x)\n",
        "bsy_m.det() == bsy_x * bsy_y and bsy_sol == [2] and bsy_p.degree() == 2 and bsy_x.is_positive and sp.sqrt(bsy_x ** 2) == bsy_x",
    ),
    # -- attrs -----------------------------------------------------------------------------------------
    _p(
        "attrs_classes",
        "attrs",
        "import attr, attrs\n@attr.s(frozen=True)\nclass AtPoint:\n    x = attr.ib(default=0)\n"
        "@attrs.define\nclass AtBag:\n    name: str\n    items: list = attrs.Factory(list)\n"
        "at_p = AtPoint(4)\nat_bag = AtBag('b')\nat_bag.items.append(at_p)",
        "at_p == AtPoint(4) and hash(at_p) == hash(AtPoint(4)) and at_bag.items[0] is at_p and AtBag('c').items == []"
        " and type(at_bag) is AtBag",
    ),
    # -- pillow ----------------------------------------------------------------------------------------
    _p(  # load_default() reads its font from bytes: PIL pickles the file object it read, at its end
        "pil_images",
        "pillow",
        "from PIL import Image, ImageDraw, ImageFont\npli_im = Image.new('RGB', (40, 20), (10, 20, 30))\n"
        "pli_im.info['note'] = 'x'\npli_pal = Image.new('P', (2, 2))\npli_pal.putpalette([0, 0, 0, 255, 0, 0] * 128)\n"
        "pli_font = ImageFont.load_default(size=12)\npli_turned = ImageFont.TransposedFont(pli_font, Image.Transpose.ROTATE_90)\n"
        "pli_box = pli_font.getbbox('hi')\nImageDraw.Draw(pli_im).text((0, 0), 'hi', font=pli_font, fill=(255, 255, 255))",
        "pli_im.getpixel((39, 19)) == (10, 20, 30) and pli_im.getbbox() is not None and pli_im.info['note'] == 'x'"
        " and pli_pal.getpalette()[3] == 255 and pli_font.getbbox('hi') == pli_box and pli_font.size == 12"
        " and pli_turned.font is pli_font and ImageDraw.Draw(pli_im.copy()).textlength('hi', font=pli_font) > 0",
    ),
    _p(
        "pil_draw",
        "pillow",
        "from PIL import Image, ImageDraw\npdr_img = Image.new('RGB', (4, 4))\npdr_draw = ImageDraw.Draw(pdr_img)\n"
        "pdr_draw.point((1, 1), fill=(255, 0, 0))\npdr_blend = ImageDraw.Draw(pdr_img, 'RGBA')",
        "(pdr_draw.point((2, 2), fill=(0, 9, 0)), pdr_img.getpixel((2, 2)))[1] == (0, 9, 0)"
        " and pdr_img.getpixel((1, 1)) == (255, 0, 0) and pdr_blend.mode == 'RGBA' and pdr_blend._image is pdr_img",
    ),
    # -- traitlets and ipywidgets ------------------------------------------------------------------------
    _p(
        "library_metaclass_globals",
        "traitlets",
        "import traitlets\nlmg_rate = 2\nlmg_calls = []\nclass LmgModel(traitlets.HasTraits):\n"
        "    n = traitlets.Int(1)\n    def scaled(self):\n        lmg_calls.append(self.n)\n"
        "        return self.n * lmg_rate\nlmg_m = LmgModel(n=3)",
        "(globals().__setitem__('lmg_rate', 5), lmg_m.scaled())[1] == 15 and lmg_calls[-1:] == [3]"
        " and LmgModel(n=4).n == 4",
    ),
    _p(
        "widgets",
        "ipywidgets",
        "import ipywidgets as wd\nwd_slider = wd.IntSlider(value=7, min=0, max=10, description='n')\n"
        "wd_pick = wd.Dropdown(options=['a', 'b'], value='b')\nwd_box = wd.VBox([wd_slider, wd_pick])\n"
        "wd_box.layout.width = '300px'\nwd_moved = []\ndef wd_on(change):\n    wd_moved.append(change['new'])\n"
        "wd_slider.observe(wd_on, names='value')\nwd_button = wd.Button(description='go')\n"
        "wd_button.on_click(lambda b: wd_moved.append(b.description))",
        "wd_slider.value == 7 and wd_slider.description == 'n' and wd_box.children == (wd_slider, wd_pick)"
        " and wd_pick.value == 'b' and wd_box.layout.width == '300px' and wd_slider.comm is not None"
        " and (setattr(wd_slider, 'value', 3), wd_button.click(), wd_moved[-2:])[2] == [3, 'go']",
    ),
    _p(
        "widget_subclass",
        "ipywidgets",
        "import ipywidgets as wd\nimport traitlets\nclass WsCounter(wd.HBox):\n    count = traitlets.Int(0)\n"
        "    def __init__(self, **kwargs):\n        super().__init__(**kwargs)\n        self.seen = []\n"
        "        self.observe(self._saw, names='count')\n    def _saw(self, change):\n"
        "        self.seen.append(change['new'])\nws_c = WsCounter(count=4)\nws_c.count = 5\nws_c.note = 'kept'",
        "ws_c.count == 5 and ws_c.seen == [5] and ws_c.note == 'kept' and (setattr(ws_c, 'count', 6) or ws_c.seen)"
        " == [5, 6] and type(ws_c) is WsCounter",
    ),
    # -- scikit-learn ----------------------------------------------------------------------------------
    _p(
        "pipeline_lambda",
        "sklearn",
        "import numpy as np\nfrom sklearn.pipeline import make_pipeline\nfrom sklearn.preprocessing import FunctionTransformer\n"
        "from sklearn.linear_model import LinearRegression\npl_X = np.arange(20.0).reshape(10, 2)\npl_y = pl_X.sum(1)\n"
        "pl_m = make_pipeline(FunctionTransformer(lambda z: z * 2), LinearRegression()).fit(pl_X, pl_y)\n"
        "pl_pred = pl_m.predict(pl_X[:3])",
        "np.allclose(pl_m.predict(pl_X[:3]), pl_pred)",
    ),
    _p(
        "scaled_classifier",
        "sklearn",
        "import numpy as np\nfrom sklearn.pipeline import Pipeline\nfrom sklearn.preprocessing import StandardScaler\n"
        "from sklearn.linear_model import LogisticRegression\nskp_X = np.random.default_rng(0).normal(size=(50, 3))\n"
        "skp_y = (skp_X[:, 0] > 0).astype(int)\n"
        "skp_m = Pipeline([('sc', StandardScaler()), ('lr', LogisticRegression())]).fit(skp_X, skp_y)\n"
        "skp_p = skp_m.predict_proba(skp_X)",
        "np.array_equal(skp_m.predict_proba(skp_X), skp_p) and skp_m.named_steps['sc'] is skp_m.steps[0][1]",
    ),
    _p(
        "grid_search",
        "sklearn",
        "import numpy as np\nfrom sklearn.model_selection import GridSearchCV\n"
        "from sklearn.linear_model import Ridge\nfrom sklearn.metrics import make_scorer\n"
        "def gsc_neg(y, p):\n    return -((y - p) ** 2).mean()\ngsc_X = np.arange(40.0).reshape(20, 2)\n"
        "gsc_y = gsc_X.sum(1)\n"
        "gsc_s = GridSearchCV(Ridge(), {'alpha': [0.1, 1.0]}, scoring=make_scorer(gsc_neg), cv=2).fit(gsc_X, gsc_y)\n"
        "gsc_pred = gsc_s.predict(gsc_X[:2])\n",
        "np.allclose(gsc_s.predict(gsc_X[:2]), gsc_pred) and gsc_s.best_params_ == {'alpha': 0.1} and gsc_s.scorer_._score_func is gsc_neg",
    ),
    _p(
        "sklearn_custom_estimator",
        "sklearn",
        "import numpy as np\nfrom sklearn.base import BaseEstimator, TransformerMixin\n"
        "from sklearn.pipeline import make_pipeline\nfrom sklearn.cluster import KMeans\n"
        "class BskScale(BaseEstimator, TransformerMixin):\n    def __init__(self, k=2.0):\n"
        "        self.k = k\n    def fit(self, X, y=None):\n        self.mean_ = X.mean(0)\n"
        "        return self\n    def transform(self, X):\n        return (X - self.mean_) * self.k\n"
        "bsk_X = np.random.default_rng(1).normal(size=(30, 2))\n"
        "bsk_m = make_pipeline(BskScale(3.0), KMeans(2, n_init=2, random_state=0)).fit(bsk_X)\n"
        "bsk_l = bsk_m.predict(bsk_X)\n",
        "(bsk_m.predict(bsk_X) == bsk_l).all() and bsk_m.get_params()['bskscale__k'] == 3.0 and type(bsk_m.steps[0][1]) is BskScale",
    ),
    # -- matplotlib ------------------------------------------------------------------------------------
    _p(
        "figure_axes",
        "matplotlib",
        "import matplotlib.pyplot as plt\nmf_fig, mf_ax = plt.subplots(1, 2)\nmf_ax[0].plot([1, 2, 3], [4, 5, 6])\n"
        "mf_ax[0].set_title('t')",
        "mf_ax[0].figure is mf_fig and mf_fig.axes[0] is mf_ax[0] and mf_ax[0].get_title() == 't'"
        " and list(mf_ax[0].lines[0].get_ydata()) == [4, 5, 6]",
    ),
    _p(
        "colormap_registered",
        "matplotlib",
        "import matplotlib\nimport matplotlib.colors as mcolors\n"
        "cmr_ramp = mcolors.LinearSegmentedColormap.from_list('cmr_ramp', ['red', 'blue'])\n"
        "matplotlib.colormaps.register(cmr_ramp)",
        "matplotlib.colormaps['cmr_ramp'] == cmr_ramp and matplotlib.colormaps['cmr_ramp'](0.0)[:3] == (1.0, 0.0, 0.0)",
    ),
    _p(
        "projection_registered",
        "matplotlib",
        "from matplotlib.projections import register_projection, get_projection_class\n"
        "from matplotlib.axes import Axes\nclass RpAxes(Axes):\n    name = 'rp_custom'\n"
        "register_projection(RpAxes)\n",
        "get_projection_class('rp_custom') is RpAxes",
    ),
    # -- networkx ------------------------------------------------------------------------------------
    _p(
        "networkx_nodes",
        "networkx",
        "import networkx as nx\nclass NxCity:\n    def __init__(self, name):\n        self.name = name\n"
        "nxc_a, nxc_b = NxCity('a'), NxCity('b')\nnxc_g = nx.DiGraph()\n"
        "nxc_g.add_edge(nxc_a, nxc_b, weight=3)\nnxc_g.graph['title'] = 'routes'\n",
        "nxc_g[nxc_a][nxc_b]['weight'] == 3 and nxc_a in nxc_g and list(nxc_g.successors(nxc_a)) == [nxc_b] and nxc_g.graph['title'] == 'routes' and nx.shortest_path(nxc_g, nxc_a, nxc_b) == [nxc_a, nxc_b]",
    ),
    _p(
        "scale_registered",
        "matplotlib",
        "import matplotlib.scale as msc\nclass RsSquare(msc.FuncScale):\n    name = 'rs_square'\n"
        "    def __init__(self, axis):\n"
        "        super().__init__(axis, (lambda x: x ** 2, lambda x: x ** 0.5))\n"
        "msc.register_scale(RsSquare)\n",
        "'rs_square' in msc.get_scale_names() and msc.scale_factory('rs_square', None).__class__ is RsSquare",
    ),
    # -- more of what notebooks keep: iterators, random streams, context variables, thread-locals, tracebacks ---
    _p(
        "iterators_advanced",
        "stdlib",
        "import itertools\nqit_count = itertools.count(10, 2)\nnext(qit_count)\n"
        "qit_cycle = itertools.cycle('ab')\nnext(qit_cycle)\n"
        "qit_isl = itertools.islice(range(100), 5, None, 10)\nnext(qit_isl)\n"
        "qit_chain = itertools.chain([1, 2], [3])\nnext(qit_chain)\n"
        "qit_acc = itertools.accumulate([1, 2, 3, 4])\nnext(qit_acc), next(qit_acc)\n"
        "qbi_rows = ['a', 'b', 'c', 'd']\nqbi_e = enumerate(qbi_rows, 1)\nnext(qbi_e)\n"
        "qbi_z = zip(qbi_rows, range(4))\nnext(qbi_z)\nqbi_m = map(lambda s: s.upper(), qbi_rows)\n"
        "next(qbi_m)\nqbi_r = reversed(qbi_rows)\nnext(qbi_r)\nqbi_d = iter({'x': 1, 'y': 2}.items())\n"
        "next(qbi_d)\n",
        "next(qit_count) == 12 and next(qit_cycle) == 'b' and next(qit_isl) == 15"
        " and list(qit_chain) == [2, 3] and next(qit_acc) == 6 and next(qbi_e) == (2, 'b')"
        " and next(qbi_z) == ('b', 1) and next(qbi_m) == 'B' and next(qbi_r) == 'c'"
        " and next(qbi_d) == ('y', 2) and (qbi_rows.__setitem__(2, 'Z'), next(qbi_e))[1] == (3, 'Z')",
    ),
    _p(
        "random_instances",
        "stdlib",
        "import random, numpy as np\nqrn_r = random.Random(42)\nqrn_r.random()\n"
        "qrn_gauss = random.Random(1)\nqrn_gauss.gauss(0, 1)\nqrn_rs = np.random.RandomState(3)\n"
        "qrn_rs.rand()\nqrn_ss = np.random.SeedSequence(1234)\nqrn_kids = qrn_ss.spawn(2)\n"
        "qrn_bg = np.random.PCG64(5)\nqrn_g1 = np.random.Generator(qrn_bg)\n"
        "qrn_g2 = np.random.Generator(qrn_bg)\nqrn_g1.random()\n",
        "qrn_r.random() == (lambda r: (r.random(), r.random())[1])(random.Random(42))"
        " and qrn_gauss.gauss(0, 1) == (lambda r: (r.gauss(0, 1), r.gauss(0, 1))[1])(random.Random(1))"
        " and qrn_rs.rand() == np.random.RandomState(3).rand(2)[1] and qrn_ss.spawn(1)[0].spawn_key == (2,)"
        " and qrn_g1.bit_generator is qrn_g2.bit_generator"
        " and qrn_g2.random() == np.random.Generator(np.random.PCG64(5)).random(2)[1]",
    ),
    _p(
        "exception_traceback",
        "plain",
        "def qtb_parse(s):\n    return int(s)\ntry:\n    qtb_parse('x')\nexcept ValueError as e:\n    qtb_e = e\n",
        "qtb_e.__traceback__ is not None"
        " and 'qtb_parse' in ''.join(__import__('traceback').format_exception(qtb_e))"
        " and __import__('traceback').extract_tb(qtb_e.__traceback__)[-1].name == 'qtb_parse'",
    ),
    _p(
        "context_variable",
        "stdlib",
        "import contextvars\nqcv_user = contextvars.ContextVar('qcv_user', default='anon')\n"
        "qcv_user.set('ann')\nqcv_alias = qcv_user\nqcv_plain = contextvars.ContextVar('qcv_plain')\n",
        "qcv_user.get() == 'ann' and qcv_alias is qcv_user and qcv_user.name == 'qcv_user'"
        " and qcv_plain.get(5) == 5 and contextvars.Context().run(qcv_user.get) == 'anon'",
    ),
    _p(
        "thread_local",
        "stdlib",
        "import threading\nqtl_local = threading.local()\nqtl_local.conn = {'db': 1}\nqtl_local.n = 3\n"
        "class QtlState(threading.local):\n    def __init__(self):\n        self.items = []\n"
        "qtl_state = QtlState()\nqtl_state.items.append(1)\n",
        "qtl_local.n == 3 and qtl_local.conn == {'db': 1} and qtl_state.items == [1]"
        " and type(qtl_state) is QtlState"
        " and (lambda out: (out, [t.start() or t.join() for t in [threading.Thread(target=lambda: out.append((getattr(qtl_local, 'n', None), qtl_state.items)))]])[0])([]) == [(None, [])]",
    ),
    _p(
        "dataclass_initvar_classvar",
        "stdlib",
        "import dataclasses, typing\n@dataclasses.dataclass\nclass QdcBase:\n    name: str\n"
        "    scale: dataclasses.InitVar[float] = 1.0\n"
        "    total: float = dataclasses.field(init=False, default=0.0)\n"
        "    count: typing.ClassVar[int] = 0\n    def __post_init__(self, scale):\n"
        "        self.total = scale * 2\n        QdcBase.count += 1\n@dataclasses.dataclass(kw_only=True)\n"
        "class QdcChild(QdcBase):\n"
        "    tags: list = dataclasses.field(default_factory=list, compare=False, repr=False)\n"
        "qdc_c = QdcChild('x', 3.0, tags=['t'])\n",
        "qdc_c.total == 6.0 and QdcBase.count == 1 and dataclasses.replace(qdc_c, scale=2.0).total == 4.0"
        " and QdcBase.count == 2"
        " and [f.name for f in dataclasses.fields(QdcChild)] == ['name', 'total', 'tags']"
        " and repr(qdc_c) == \"QdcChild(name='x', total=6.0)\""
        " and dataclasses.asdict(qdc_c) == {'name': 'x', 'total': 6.0, 'tags': ['t']}",
    ),
    _p(
        "descriptor_weak_values",
        "plain",
        "import weakref\nclass QdsPositive:\n    def __init__(self):\n"
        "        self.values = weakref.WeakKeyDictionary()\n    def __set_name__(self, owner, name):\n"
        "        self.name = name\n    def __get__(self, obj, owner=None):\n"
        "        return self if obj is None else self.values.get(obj, 0)\n    def __set__(self, obj, v):\n"
        "        if v < 0:\n            raise ValueError(self.name)\n        self.values[obj] = v\n"
        "class QdsOrder:\n    qty = QdsPositive()\n    def __init__(self, q):\n        self.qty = q\n"
        "qds_o = QdsOrder(5)\nqds_p = QdsOrder(7)\n",
        "qds_o.qty == 5 and qds_p.qty == 7 and QdsOrder.qty.name == 'qty' and qds_o in QdsOrder.qty.values"
        " and (setattr(qds_o, 'qty', 9), qds_o.qty)[1] == 9 and QdsOrder(1).qty == 1",
    ),
    _p(
        "closure_nonlocal_shared",
        "plain",
        "def qcl_counter():\n    n = 0\n    def inc():\n        nonlocal n\n        n += 1\n"
        "        return n\n    def get():\n        return n\n    return inc, get\n"
        "qcl_inc, qcl_get = qcl_counter()\nqcl_inc()\nqcl_inc()\n",
        "qcl_get() == 2 and (qcl_inc(), qcl_get())[1] == 3",
    ),
    _p(
        "decorators_without_wraps",
        "plain",
        "def qdw_count(f):\n    def wrapper(*a):\n        wrapper.calls += 1\n        return f(*a)\n"
        "    wrapper.calls = 0\n    return wrapper\n@qdw_count\ndef qdw_add(a, b):\n    return a + b\n"
        "qdw_add(1, 2)\ndef qdw_retry(times):\n    def deco(f):\n        def run(*a):\n"
        "            for _ in range(times):\n                try:\n                    return f(*a)\n"
        "                except ValueError:\n                    pass\n            return None\n"
        "        return run\n    return deco\nqdw_tries = []\n@qdw_retry(3)\ndef qdw_flaky(x):\n"
        "    qdw_tries.append(x)\n    if len(qdw_tries) % 3:\n        raise ValueError(x)\n    return x\n"
        "def qdw_with_repr(cls):\n    cls.__repr__ = lambda self: f'<{cls.__name__} {vars(self)}>'\n"
        "    return cls\n@qdw_with_repr\nclass QdwPoint:\n    def __init__(self, x):\n        self.x = x\n"
        "qdw_p = QdwPoint(1)\n",
        "qdw_add.calls == 1 and qdw_add(2, 3) == 5 and qdw_add.calls == 2 and qdw_add.__name__ == 'wrapper'"
        " and qdw_flaky(4) == 4 and qdw_tries == [4, 4, 4] and repr(qdw_p) == \"<QdwPoint {'x': 1}>\"",
    ),
    _p(
        "abc_subclasshook",
        "plain",
        "import abc\nclass QabClosable(abc.ABC):\n    @classmethod\n    def __subclasshook__(cls, C):\n"
        "        return True if any('close' in B.__dict__ for B in C.__mro__) else NotImplemented\n"
        "class QabFile:\n    def close(self):\n        pass\nclass QabOther:\n    pass\n"
        "QabClosable.register(QabOther)\nqab_f = QabFile()\n",
        "isinstance(qab_f, QabClosable) and isinstance(QabOther(), QabClosable) and not issubclass(int, QabClosable)",
    ),
    _p(
        "reduce_getstate_classes",
        "plain",
        "class QrdConn:\n    def __init__(self, url):\n        self.url = url\n        self.opened = 1\n"
        "    def __reduce__(self):\n        return (QrdConn, (self.url,))\nclass QrdVersioned:\n"
        "    def __init__(self):\n        self.a = 1\n        self.cache = {'big': 1}\n"
        "    def __getstate__(self):\n        s = self.__dict__.copy()\n        del s['cache']\n"
        "        return s\n    def __setstate__(self, s):\n        self.__dict__.update(s)\n"
        "        self.cache = {}\nclass QrdNewArgs:\n    def __new__(cls, *, unit):\n"
        "        o = super().__new__(cls)\n        o.unit = unit\n        return o\n"
        "    def __getnewargs_ex__(self):\n        return (), {'unit': self.unit}\n"
        "qrd_c = QrdConn('db://x')\nqrd_v = QrdVersioned()\nqrd_n = QrdNewArgs(unit='m')\n"
        "qrd_shared = [qrd_c, qrd_c]\n",
        "qrd_c.url == 'db://x' and type(qrd_c) is QrdConn and qrd_v.a == 1 and 'cache' in vars(qrd_v)"
        " and qrd_n.unit == 'm' and type(qrd_n) is QrdNewArgs and qrd_shared[1] is qrd_c is qrd_shared[0]",
    ),
    _p(
        "builtin_subclass_new_arguments",
        "plain",
        "class QtsPair(tuple):\n    def __new__(cls, a, b):\n        return super().__new__(cls, (a, b))\n"
        "    @property\n    def total(self):\n        return self[0] + self[1]\nclass QtsTagged(str):\n"
        "    def __new__(cls, text, tag):\n        o = super().__new__(cls, text)\n        o.tag = tag\n"
        "        return o\nclass QtsVec(tuple):\n    def __new__(cls, *xs):\n"
        "        return super().__new__(cls, xs)\nclass QtsBag(frozenset):\n    def __new__(cls, *items):\n"
        "        return super().__new__(cls, items)\nqts_p = QtsPair(1, 2)\n"
        "qts_t = QtsTagged('hello', 'greeting')\nqts_b = QtsBag('x', 'y')\nqts_d = {qts_p: qts_t}\n"
        "qts_v = QtsVec(1, 2)\nqts_vd = {qts_v: 'v'}\n",
        "qts_p == (1, 2) and qts_p.total == 3 and type(qts_p) is QtsPair and qts_t == 'hello'"
        " and qts_t.tag == 'greeting' and type(qts_t) is QtsTagged and qts_b == {'x', 'y'}"
        " and type(qts_b) is QtsBag and qts_d[(1, 2)] is qts_t and qts_v == (1, 2)"
        " and qts_vd[QtsVec(1, 2)] == 'v' and type(qts_v) is QtsVec",
    ),
    _p(
        "collections_nested",
        "stdlib",
        "import collections\nqco_nest = collections.defaultdict(lambda: collections.defaultdict(int))\n"
        "qco_nest['a']['x'] += 2\nqco_cm = collections.ChainMap({}, {'lr': 0.1})\n"
        "qco_child = qco_cm.new_child({'lr': 0.5})\nqco_od = collections.OrderedDict.fromkeys('abc')\n"
        "qco_od.move_to_end('a')\nqco_dq = collections.deque([1, 2, 3], maxlen=3)\nqco_dq.rotate(1)\n"
        "qco_c = collections.Counter(a=3, b=-1)\n",
        "qco_nest['a']['x'] == 2 and qco_nest['b']['y'] == 0"
        " and type(qco_nest['b']) is collections.defaultdict and qco_child['lr'] == 0.5"
        " and qco_child.parents.maps[0] is qco_cm.maps[0] and qco_child.maps[1] is qco_cm.maps[0]"
        " and list(qco_od) == ['b', 'c', 'a'] and (qco_dq.append(4), list(qco_dq))[1] == [1, 2, 4]"
        " and qco_dq.maxlen == 3 and +qco_c == collections.Counter(a=3) and qco_c['b'] == -1",
    ),
    _p(
        "array_module_views",
        "stdlib",
        "import array\nqar_a = array.array('d', [1.5, 2.5])\nqar_i = array.array('q', range(5))\n"
        "qar_mv = memoryview(qar_i)[1:3]\nqar_ba = bytearray(b'hello world')\n"
        "qar_view = memoryview(qar_ba)[6:]\n",
        "qar_a.typecode == 'd' and qar_a[1] == 2.5 and qar_mv.tolist() == [1, 2] and qar_mv.obj is qar_i"
        " and (qar_i.__setitem__(1, 9), qar_mv[0])[1] == 9 and bytes(qar_view) == b'world'"
        " and (qar_ba.__setitem__(6, 87), bytes(qar_view))[1] == b'World'",
    ),
    _p(
        "frozenset_keys_recursive",
        "plain",
        "qss_edges = {frozenset({'a', 'b'}), frozenset({'b', 'c'})}\n"
        "qss_w = {frozenset({'a', 'b'}): 1.5, ('x', 1): [2]}\nqss_rec = {'name': 'root'}\n"
        "qss_rec['self'] = qss_rec\nqss_rec['kids'] = [{'up': qss_rec}]\n",
        "frozenset({'a', 'b'}) in qss_edges and qss_w[frozenset('ab')] == 1.5 and qss_w[('x', 1)] == [2]"
        " and qss_rec['self'] is qss_rec and qss_rec['kids'][0]['up'] is qss_rec",
    ),
    _p(
        "numpy_strided_views",
        "numpy",
        "import numpy as np\nqnv_a = np.arange(24.0).reshape(4, 6)\nqnv_t = qnv_a.T\n"
        "qnv_s = qnv_a[::2, ::3]\nqnv_r = qnv_a[::-1]\nqnv_d = np.diagonal(qnv_a)\n"
        "qnv_be = np.arange(3, dtype='>f8')\nqnv_u = np.array(['ab', 'cde'])\n"
        "qnv_sub = np.zeros(2, dtype=[('pos', 'f4', (3,)), ('id', 'i2')])\nqnv_sub['pos'][1] = [1, 2, 3]\n"
        "qnv_poly = np.polynomial.Polynomial.fit([0, 1, 2], [1, 3, 5], 1)\n",
        "np.shares_memory(qnv_t, qnv_a) and np.shares_memory(qnv_s, qnv_a)"
        " and np.shares_memory(qnv_d, qnv_a)"
        " and (qnv_a.__setitem__((2, 3), -1.0), qnv_s[1, 1], qnv_t[3, 2], qnv_r[1, 3])[1:] == (-1.0, -1.0, -1.0)"
        " and not qnv_d.flags.writeable and qnv_be.dtype.byteorder == '>'"
        " and qnv_u.dtype == np.dtype('<U3') and qnv_sub['pos'][1].tolist() == [1, 2, 3]"
        " and qnv_sub.dtype['pos'].shape == (3,) and round(float(qnv_poly(3)), 6) == 7.0",
    ),
    _p(
        "pandas_structures",
        "pandas",
        "import pandas as pd, numpy as np\n"
        "qpd_cat = pd.Categorical(['lo', 'hi', 'lo'], categories=['lo', 'hi'], ordered=True)\n"
        "qpd_cols = pd.DataFrame(np.arange(6).reshape(2, 3), columns=pd.MultiIndex.from_tuples([('a', 'x'), ('a', 'y'), ('b', 'x')], names=['grp', 'sub']))\n"
        "qpd_sp = pd.Series(pd.arrays.SparseArray([0, 0, 1, 0, 2], fill_value=0))\n"
        "qpd_dup = pd.DataFrame([[1, 2]], columns=['k', 'k'])\n"
        "qpd_ts = pd.Series(range(4), index=pd.date_range('2024-01-01', periods=4, freq='W-MON', name='week'))\n"
        "qpd_iv = pd.Series([1, 2], index=pd.IntervalIndex.from_breaks([0, 5, 10], closed='left'))\n"
        "qpd_td = pd.Series(pd.to_timedelta([1, 2], unit='h'), name=('run', 1))\n",
        "qpd_cat.ordered and qpd_cat.min() == 'lo' and qpd_cat.codes.tolist() == [0, 1, 0]"
        " and qpd_cols['a']['y'].tolist() == [1, 4] and list(qpd_cols.columns.names) == ['grp', 'sub']"
        " and qpd_sp.sparse.density == 0.4 and qpd_sp.sparse.fill_value == 0"
        " and qpd_dup.columns.tolist() == ['k', 'k'] and qpd_ts.index.freqstr == 'W-MON'"
        " and qpd_ts.index.name == 'week' and qpd_iv.loc[5] == 2 and qpd_iv.index.closed == 'left'"
        " and qpd_td.name == ('run', 1) and qpd_td.sum() == pd.Timedelta(hours=3)",
    ),
    _p(
        "column_transformer_fitted",
        "sklearn",
        "import numpy as np, pandas as pd\n"
        "from sklearn.compose import ColumnTransformer, make_column_selector\n"
        "from sklearn.preprocessing import OneHotEncoder, StandardScaler\n"
        "from sklearn.pipeline import Pipeline\nfrom sklearn.ensemble import RandomForestClassifier\n"
        "qsk_df = pd.DataFrame({'city': ['a', 'b', 'a', 'c'] * 5, 'x': np.arange(20.0), 'y': [0, 1] * 10})\n"
        "qsk_ct = ColumnTransformer([('cat', OneHotEncoder(handle_unknown='ignore', sparse_output=False), ['city']),\n"
        "                            ('num', StandardScaler(), make_column_selector(pattern='x'))]).set_output(transform='pandas')\n"
        "qsk_m = Pipeline([('prep', qsk_ct), ('rf', RandomForestClassifier(n_estimators=5, random_state=np.random.RandomState(0)))])\n"
        "qsk_m.fit(qsk_df[['city', 'x']], qsk_df['y'])\n"
        "qsk_p = qsk_m.predict_proba(qsk_df[['city', 'x']])\n",
        "np.array_equal(qsk_m.predict_proba(qsk_df[['city', 'x']]), qsk_p)"
        " and list(qsk_m[:-1].transform(qsk_df[['city', 'x']]).columns) == ['cat__city_a', 'cat__city_b', 'cat__city_c', 'num__x']"
        " and list(qsk_m.feature_names_in_) == ['city', 'x'] and qsk_m.named_steps['prep'] is qsk_ct",
    ),
    _p(
        "sparse_formats",
        "scipy",
        "import scipy.sparse as sps\nqsp_lil = sps.lil_matrix((3, 3))\nqsp_lil[0, 1] = 2.0\n"
        "qsp_dok = sps.dok_matrix((2, 2))\nqsp_dok[1, 1] = 5.0\n"
        "qsp_csc = sps.random(5, 4, density=0.5, format='csc', random_state=0)\n"
        "qsp_dia = sps.diags([1.0, 2.0, 3.0])\n",
        "qsp_lil[0, 1] == 2.0 and (qsp_lil.__setitem__((2, 2), 1.0), qsp_lil.nnz)[1] == 2"
        " and qsp_dok[1, 1] == 5.0 and type(qsp_dok) is sps.dok_matrix and qsp_csc.format == 'csc'"
        " and qsp_csc.nnz == 10 and qsp_dia.diagonal().tolist() == [1.0, 2.0, 3.0]"
        " and (qsp_dok.__setitem__((0, 0), 1.0), qsp_dok.nnz)[1] == 2",
    ),
    _p(
        "figure_artists",
        "matplotlib",
        "import matplotlib\nimport matplotlib.pyplot as plt\nqmp_fig, qmp_ax = plt.subplots()\n"
        "qmp_line, = qmp_ax.plot([0, 1, 2], [1, 0, 2], label='loss', color='red')\n"
        "qmp_ax2 = qmp_ax.twinx()\nqmp_ax2.bar([0, 1], [3, 4])\n"
        "qmp_ax.annotate('min', xy=(1, 0), xytext=(1.5, 1), arrowprops={'arrowstyle': '->'})\n"
        "qmp_ax.add_patch(matplotlib.patches.Rectangle((0, 0), 0.5, 0.5, alpha=0.3))\nqmp_ax.legend()\n"
        "qmp_im = qmp_ax.imshow([[0, 1], [2, 3]], extent=(0, 2, 0, 2))\nqmp_cb = qmp_fig.colorbar(qmp_im)\n"
        "qmp_clicks = []\n"
        "qmp_cid = qmp_fig.canvas.mpl_connect('button_press_event', lambda e: qmp_clicks.append(e))\n",
        "qmp_line.axes is qmp_ax and qmp_line.get_label() == 'loss'"
        " and qmp_ax2.get_shared_x_axes().joined(qmp_ax, qmp_ax2) and len(qmp_ax2.patches) == 2"
        " and qmp_ax.texts[0].get_text() == 'min'"
        " and qmp_ax.get_legend().get_texts()[0].get_text() == 'loss' and qmp_cb.mappable is qmp_im"
        " and (qmp_fig.canvas.callbacks.callbacks['button_press_event'][qmp_cid]()('E'), qmp_clicks)[1] == ['E']"
        " and (qmp_fig.canvas.draw(), qmp_line.get_color())[1] == 'red'",
    ),
    _p(
        "open_files_at_positions",
        "stdlib",
        "import io, os, tempfile\nqfl_dir = tempfile.mkdtemp(prefix='jupyter-ckpt-corpus-')\n"
        "with open(os.path.join(qfl_dir, 'rows.txt'), 'w') as _qfl_f:\n"
        "    _qfl_f.write('one\\ntwo\\nthree\\n')\ndel _qfl_f\n"
        "qfl_r = open(os.path.join(qfl_dir, 'rows.txt'))\nqfl_r.readline()\n"
        "qfl_b = open(os.path.join(qfl_dir, 'rows.txt'), 'rb')\nqfl_b.seek(4)\n"
        "qfl_log = open(os.path.join(qfl_dir, 'log.txt'), 'a')\nqfl_log.write('start\\n')\n"
        "qfl_log.flush()\nqfl_s = io.StringIO('alpha\\nbeta\\n')\nqfl_s.readline()\n"
        "qfl_by = io.BytesIO(b'0123456789')\nqfl_by.seek(7)\n"
        "qfl_tmp = tempfile.NamedTemporaryFile('w+', suffix='.csv', delete=False)\n"
        "qfl_tmp.write('a,b\\n')\nqfl_tmp.flush()\n",
        "qfl_r.readline() == 'two\\n' and qfl_b.read(3) == b'two' and qfl_log.mode == 'a'"
        " and (qfl_log.write('more\\n'), qfl_log.flush(), open(qfl_log.name).read())[2].startswith('start\\nmore\\n')"
        " and qfl_s.readline() == 'beta\\n' and qfl_by.read() == b'789' and qfl_tmp.tell() == 4"
        " and open(qfl_tmp.name).read().startswith('a,b\\n')",
    ),
    _p(
        "properties_class_static_methods",
        "plain",
        "class QpdTemp:\n    made = 0\n    def __init__(self, c):\n        self._c = c\n"
        "        QpdTemp.made += 1\n    @property\n    def f(self):\n        return self._c * 9 / 5 + 32\n"
        "    @f.setter\n    def f(self, v):\n        self._c = (v - 32) * 5 / 9\n    @f.deleter\n"
        "    def f(self):\n        del self._c\n    @classmethod\n    def from_f(cls, v):\n"
        "        o = cls(0)\n        o.f = v\n        return o\n    @staticmethod\n    def valid(c):\n"
        "        return c > -273.15\nqpd_t = QpdTemp.from_f(212)\n",
        "qpd_t._c == 100 and QpdTemp.made == 1 and QpdTemp.valid(-300) is False"
        " and (delattr(qpd_t, 'f'), hasattr(qpd_t, '_c'))[1] is False and QpdTemp.from_f(32)._c == 0"
        " and QpdTemp.made == 2",
    ),
    _p(
        "typing_generic_forms",
        "stdlib",
        "from typing import Annotated, Generic, Literal, NamedTuple, TypeVar, get_args, get_type_hints\n"
        "QtyT = TypeVar('QtyT')\nclass QtyBox(Generic[QtyT]):\n    item: QtyT\n"
        "class QtyIntBox(QtyBox[int]):\n    pass\nclass QtyPair(NamedTuple, Generic[QtyT]):\n    a: QtyT\n"
        "    b: QtyT\nqty_mode = Literal['train', 'eval']\nqty_meters = Annotated[float, 'm']\n"
        "class QtyCfg:\n    mode: 'qty_mode'\n    length: qty_meters\nqty_p = QtyPair(1, 2)\n",
        "QtyIntBox.__orig_bases__[0].__args__ == (int,)"
        " and QtyIntBox.__orig_bases__[0].__origin__ is QtyBox and qty_p.b == 2"
        " and isinstance(qty_p, QtyPair) and get_args(qty_mode) == ('train', 'eval')"
        " and get_type_hints(QtyCfg, include_extras=True)['length'] == qty_meters"
        " and get_type_hints(QtyCfg)['mode'] == qty_mode",
    ),
    _p(
        "enum_flags_missing",
        "stdlib",
        "import enum\nclass QenPerm(enum.IntFlag):\n    R = 4\n    W = 2\n    X = 1\n"
        "qen_rw = QenPerm.R | QenPerm.W\nqen_odd = QenPerm(8)\nclass QenColor(enum.StrEnum):\n"
        "    RED = enum.auto()\nclass QenLevel(enum.Enum):\n    LOW = 1\n    @classmethod\n"
        "    def _missing_(cls, value):\n        return cls.LOW\nqen_lv = QenLevel(99)\n",
        "qen_rw == 6 and qen_rw is QenPerm(6) and QenPerm.R in qen_rw and int(qen_odd) == 8"
        " and QenColor.RED == 'red' and qen_lv is QenLevel.LOW and QenLevel(5) is QenLevel.LOW"
        " and str(QenColor.RED) == 'red'",
    ),
    _p(
        "partials_and_dispatch",
        "stdlib",
        "import functools\nclass QftModel:\n    def __init__(self, lr, depth=1):\n"
        "        self.lr, self.depth = lr, depth\n    def score(self, x, scale=1):\n"
        "        return x * self.lr * scale\nqft_make = functools.partial(QftModel, depth=3)\n"
        "qft_make2 = functools.partial(qft_make, 0.5)\nqft_m = qft_make2()\n"
        "qft_score = functools.partial(qft_m.score, scale=10)\n@functools.singledispatch\ndef qft_fmt(x):\n"
        "    return str(x)\nqft_fmt.register(float, lambda x: f'{x:.1f}')\n",
        "qft_m.depth == 3 and qft_make2().lr == 0.5 and qft_score.func.__self__ is qft_m"
        " and qft_score(2) == 10.0 and qft_fmt(1.25) == '1.2' and qft_fmt(3) == '3'",
    ),
    _p(
        "class_holds_its_instance",
        "plain",
        "class QcaConfig:\n    default = None\n    def __init__(self, lr):\n        self.lr = lr\n"
        "QcaConfig.default = QcaConfig(0.1)\nqca_c = QcaConfig.default\nqca_c.lr = 0.2\n",
        "QcaConfig.default is qca_c and qca_c.lr == 0.2 and type(QcaConfig.default) is QcaConfig",
    ),
    _p(
        "mutable_mapping_abc",
        "stdlib",
        "import collections.abc\nclass QmmStore(collections.abc.MutableMapping):\n    def __init__(self):\n"
        "        self._d = {}\n    def __getitem__(self, k):\n        return self._d[k.lower()]\n"
        "    def __setitem__(self, k, v):\n        self._d[k.lower()] = v\n    def __delitem__(self, k):\n"
        "        del self._d[k.lower()]\n    def __iter__(self):\n        return iter(self._d)\n"
        "    def __len__(self):\n        return len(self._d)\nqmm_s = QmmStore()\nqmm_s['A'] = 1\n",
        "qmm_s['a'] == 1 and isinstance(qmm_s, collections.abc.Mapping) and qmm_s.get('Z', 0) == 0"
        " and dict(qmm_s) == {'a': 1}",
    ),
    _p(
        "zip_archive",
        "stdlib",
        "import os, tempfile, zipfile\n"
        "qzp_path = os.path.join(tempfile.mkdtemp(prefix='jupyter-ckpt-corpus-'), 'a.zip')\n"
        "with zipfile.ZipFile(qzp_path, 'w') as qzp_done:\n    qzp_done.writestr('a.txt', 'hello')\n"
        "    qzp_done.writestr('b.txt', 'bye')\nqzp_z = zipfile.ZipFile(qzp_path)\n",
        "qzp_z.read('b.txt') == b'bye' and qzp_z.namelist() == ['a.txt', 'b.txt'] and qzp_done.fp is None",
    ),
    _p(
        "finished_thread_queue",
        "stdlib",
        "import asyncio, threading\nqfq_out = []\n"
        "qfq_t = threading.Thread(target=lambda: qfq_out.append(1), name='qfq_worker')\nqfq_t.start()\n"
        "qfq_t.join()\nqfq_q = asyncio.Queue()\nqfq_q.put_nowait(1)\nqfq_q.put_nowait(2)\n",
        "qfq_t.name == 'qfq_worker' and not qfq_t.is_alive() and qfq_out == [1] and qfq_q.qsize() == 2"
        " and qfq_q.get_nowait() == 1",
    ),
    _p(
        "json_csv_helpers",
        "stdlib",
        "import csv, io, json, types\n"
        "qjs_dec = json.JSONDecoder(object_hook=lambda d: types.SimpleNamespace(**d))\n"
        "qjs_enc = json.JSONEncoder(sort_keys=True, indent=1)\n"
        "qjs_sniff = csv.Sniffer().sniff('a;b\\n1;2\\n')\n",
        "qjs_dec.decode('{\"a\": 1}').a == 1"
        " and qjs_enc.encode({'b': 1, 'a': 2}) == '{\\n \"a\": 2,\\n \"b\": 1\\n}'"
        " and qjs_sniff.delimiter == ';'",
    ),
    _p(
        "ctypes_structure",
        "stdlib",
        "import ctypes\nclass QctPoint(ctypes.Structure):\n    _fields_ = [('x', ctypes.c_int), ('y', ctypes.c_double)]\n"
        "    def norm(self):\n        return abs(self.x) + abs(self.y)\nqct_p = QctPoint(-1, 2.5)\n"
        "qct_arr = (QctPoint * 2)(qct_p)\n",
        "qct_p.norm() == 3.5 and type(qct_p) is QctPoint and ctypes.sizeof(QctPoint) == 16 and qct_arr[0].x == -1"
        " and type(qct_arr[1]) is QctPoint",
    ),
    _p(  # a log of rows written a row per cell
        "csv_writer_rows",
        "stdlib",
        "import csv, os, tempfile\nqcw_path = os.path.join(tempfile.mkdtemp(prefix='jupyter-ckpt-corpus-'), 'log.csv')\n"
        "qcw_f = open(qcw_path, 'w', newline='')\nqcw_w = csv.writer(qcw_f, delimiter=';')\n"
        "qcw_w.writerow(['epoch', 'loss'])\nqcw_f.flush()\n",
        "qcw_w.writerow([1, 0.5]) == 7 and (qcw_f.flush(), open(qcw_path).read())[1].startswith('epoch;loss\\n1;0.5\\n')"
        " and qcw_w.dialect.delimiter == ';'",
    ),
    _p(
        "finalizers_tees_groupby",
        "stdlib",
        "import itertools, weakref\nqwf_log = []\nclass QwfRes:\n    pass\nqwf_r = QwfRes()\n"
        "qwf_f = weakref.finalize(qwf_r, qwf_log.append, 'closed')\n"
        "qwf_a, qwf_b = itertools.tee(iter([1, 2, 3]))\nnext(qwf_a)\nqwf_g = itertools.groupby('aabbbc')\n"
        "next(qwf_g)\n",
        "qwf_f.alive and qwf_f.peek()[0] is qwf_r and (qwf_f(), qwf_log)[1] == ['closed']"
        " and not qwf_f.alive and next(qwf_a) == 2 and next(qwf_b) == 1 and next(qwf_g)[0] == 'b'",
    ),
    _p(
        "frozen_slots_weakref",
        "stdlib",
        "import dataclasses, weakref\n@dataclasses.dataclass(frozen=True, slots=True, weakref_slot=True)\n"
        "class QfsKey:\n    name: str\n    n: int = 0\nqfs_k = QfsKey('a', 1)\n"
        "qfs_ref = weakref.ref(qfs_k)\nqfs_index = {qfs_k: [1]}\n",
        "qfs_ref() is qfs_k and qfs_index[QfsKey('a', 1)] == [1] and not hasattr(qfs_k, '__dict__')"
        " and (lambda: (setattr(qfs_k, 'n', 2)))  is not None and dataclasses.replace(qfs_k, n=5).n == 5",
    ),
    _p(
        "distribution_random_state",
        "scipy",
        "import numpy as np, scipy.stats\nqsr_dist = scipy.stats.norm(loc=1.0)\n"
        "qsr_dist.random_state = np.random.default_rng(3)\nqsr_dist.rvs()\n",
        "qsr_dist.rvs() == (lambda d: (d.rvs(), d.rvs())[1])((lambda d: (setattr(d, 'random_state', np.random.default_rng(3)), d)[1])(scipy.stats.norm(loc=1.0)))",
    ),
    # -- torch -----------------------------------------------------------------------------------------
    _p(
        "torch_training",
        "torch",
        "import torch\ntorch.manual_seed(0)\nclass TtNet(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = torch.nn.Linear(3, 1)\n    def forward(self, x):\n        return self.lin(x)\ntt_m = TtNet()\n"
        "tt_opt = torch.optim.SGD(tt_m.parameters(), lr=0.1, momentum=0.9)\n"
        "tt_sched = torch.optim.lr_scheduler.StepLR(tt_opt, step_size=1)\ntt_x = torch.ones(4, 3)\n"
        "tt_m(tt_x).sum().backward()\ntt_opt.step()\ntt_sched.step()\ntt_w = tt_m.lin.weight.detach().clone()",
        "torch.equal(tt_m.lin.weight.detach(), tt_w) and tt_opt.param_groups[0]['params'][0] is tt_m.lin.weight"
        " and isinstance(tt_m, TtNet) and tt_sched.optimizer is tt_opt",
    ),
    _p(
        "lazy_module",
        "torch",
        "import torch\nlm_m = torch.nn.LazyLinear(3)",
        "type(lm_m.weight).__name__ == 'UninitializedParameter' and lm_m.has_uninitialized_params()"
        " and lm_m.out_features == 3",
    ),
    _p(
        "tensor_views",
        "torch",
        "import torch\ntv_x = torch.arange(12.0)\ntv_rows = tv_x.view(3, 4)\ntv_col = tv_rows[:, 1]",
        "(tv_col.__setitem__(0, -5.0) or tv_x[1].item() == -5.0) and tv_rows._base is tv_x and tv_col._base is tv_x",
    ),
    _p(
        "tensor_from_numpy",
        "torch",
        "import torch, numpy as np\ntn_a = np.arange(8.0)\ntn_t = torch.from_numpy(tn_a)\ntn_tail = torch.from_numpy(tn_a[4:])",
        "(tn_a.__setitem__(5, -1.0) or (tn_t[5].item(), tn_tail[1].item()) == (-1.0, -1.0))",
    ),
    _p(
        "tensor_grad",
        "torch",
        "import torch\ntg_w = torch.ones(2, requires_grad=True)\n(tg_w * 3).sum().backward()",
        "tg_w.grad.tolist() == [3.0, 3.0] and tg_w.requires_grad",
    ),
    _p(  # a graph cannot be saved: what autograd made comes back detached, a view of a leaf as that view
        "tensor_graph",
        "torch",
        "import torch\ntgr_w = torch.ones(3, requires_grad=True)\ntgr_loss = (tgr_w * 2).sum()\ntgr_head = tgr_w[:2]",
        "tgr_loss.item() == 6.0 and (tgr_loss.grad_fn is not None or not tgr_loss.requires_grad)"
        " and tgr_head._base is tgr_w and torch.enable_grad()(lambda: tgr_head.sum().backward())() is None"
        " and tgr_w.grad.tolist() == [1.0, 1.0, 0.0]",
    ),
    _p(
        "torch_parametrized",
        "torch",
        "import torch\nfrom torch.nn.utils import parametrizations, parametrize\n"
        "tpz_layer = parametrizations.weight_norm(torch.nn.Linear(2, 2))\n"
        "tpz_opt = torch.optim.SGD(tpz_layer.parameters(), lr=0.1)\ntpz_y = tpz_layer(torch.ones(1, 2)).detach()",
        "torch.equal(tpz_layer(torch.ones(1, 2)), tpz_y) and parametrize.is_parametrized(tpz_layer, 'weight')"
        " and any(p is tpz_layer.parametrizations.weight.original0 for p in tpz_opt.param_groups[0]['params'])",
    ),
    _p(
        "torch_frozen_eval",
        "torch",
        "import torch\n"
        "qtf_m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5), torch.nn.Linear(2, 1))\n"
        "qtf_m[0].weight.requires_grad_(False)\n"
        "qtf_m.register_buffer('scratch', torch.ones(1), persistent=False)\nqtf_m.eval()\n"
        "qtf_trainable = [n for n, p in qtf_m.named_parameters() if p.requires_grad]\n",
        "not qtf_m.training and not qtf_m[1].training and not qtf_m[0].weight.requires_grad"
        " and [n for n, p in qtf_m.named_parameters() if p.requires_grad] == qtf_trainable == ['0.bias', '2.weight', '2.bias']"
        " and 'scratch' not in qtf_m.state_dict() and qtf_m.scratch.tolist() == [1.0]"
        " and type(qtf_m[0].weight) is torch.nn.Parameter",
    ),
    _p(
        "torch_hooks_adam",
        "torch",
        "import torch\ntorch.manual_seed(1)\nqth_seen = []\nclass QthNet(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = torch.nn.Linear(2, 2)\n"
        "        self.register_buffer('steps', torch.zeros(()))\n    def forward(self, x):\n"
        "        self.steps += 1\n        return self.fc(x)\nqth_m = QthNet()\n"
        "def qth_hook(mod, inp, out):\n    qth_seen.append(tuple(out.shape))\n"
        "qth_handle = qth_m.fc.register_forward_hook(qth_hook)\n"
        "qth_opt = torch.optim.Adam(qth_m.parameters(), lr=0.01)\n"
        "qth_m(torch.ones(1, 2)).sum().backward()\nqth_opt.step()\n"
        "qth_w = qth_m.fc.weight.detach().clone()\nqth_sd = qth_m.state_dict()\n"
        "qth_g = torch.Generator().manual_seed(3)\nqth_g.seed\n"
        "qth_ds = torch.utils.data.TensorDataset(torch.arange(10.0))\n"
        "qth_dl = torch.utils.data.DataLoader(qth_ds, batch_size=4, shuffle=True, generator=qth_g)\n"
        "qth_first = [b[0].tolist() for b in qth_dl]\n",
        "torch.equal(qth_m.fc.weight.detach(), qth_w) and qth_opt.state[qth_m.fc.weight]['step'] == 1"
        " and qth_opt.param_groups[0]['params'][0] is qth_m.fc.weight"
        " and qth_sd['fc.weight'].data_ptr() == qth_m.fc.weight.data_ptr()"
        " and (qth_m(torch.ones(1, 2)), qth_seen)[1] == [(1, 2), (1, 2)] and qth_m.steps.item() == 2"
        " and (qth_handle.remove(), qth_m(torch.ones(1, 2)), len(qth_seen))[2] == 2"
        " and qth_dl.generator is qth_g"
        " and [b[0].tolist() for b in qth_dl] == (lambda d: ([b for b in d], [b[0].tolist() for b in d])[1])(torch.utils.data.DataLoader(qth_ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(3)))",
    ),
    _p(  # the last to draw from torch's stream, so that its check sees the draws its setup expects
        "torch_random_stream",
        "torch",
        "import torch\ntorch.manual_seed(11)\ntr_next = torch.rand(2)\ntorch.manual_seed(11)",
        "torch.equal(torch.rand(2), tr_next)",
    ),
    _p(  # how a later cell prints a tensor, as numpy's print options do an array
        "torch_print_options",
        "torch",
        "import torch\ntorch.set_printoptions(precision=2, sci_mode=False)",
        "torch._tensor_str.PRINT_OPTS.precision == 2 and repr(torch.tensor([1.23456, 20000.0])) == 'tensor([    1.23, 20000.00])'",
    ),
    _p(
        "library_settings",
        "settings",
        "import decimal, sys, sklearn, torch\ndecimal.getcontext().prec = 6\nsys.setrecursionlimit(4321)\n"
        "torch.set_grad_enabled(False)\nsklearn.set_config(display='text')",
        "str(decimal.Decimal(1) / 7) == '0.142857' and sys.getrecursionlimit() == 4321"
        " and sklearn.get_config()['display'] == 'text' and not torch.is_grad_enabled()",
    ),
]
