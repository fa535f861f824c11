// A tiny element builder: h('li', {class: 'x', onclick: f}, 'text', child).
type Attrs = { [key: string]: string | number | boolean | null | undefined | ((e: Event) => void) };
type Child = Node | string | null | undefined | false;

export function h(tag: string, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (value !== null && value !== undefined && value !== false) {
      el.setAttribute(key, String(value));
    }
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      el.append(child);
    }
  }
  return el;
}
