/**
 * A strict reader of the XML that tests check (the simulator's JUnit report): elements, attributes,
 * text, the five predefined entities and numeric character references, an XML declaration. It
 * throws on anything that is not well-formed — an unclosed or mismatched tag, an unquoted or
 * repeated attribute, a bare `&` or `<`, a character XML 1.0 forbids — so a test that reads a
 * document with it has checked that any XML reader will take it.
 */

export interface XmlElement {
  name: string;
  attributes: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const NAME = /[A-Za-z_:][\w.:-]*/y;
// XML 1.0's Char production, less the surrogates JavaScript strings pair up.
const FORBIDDEN = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/;

/** Parses `text` into its root element; throws naming the offset of the first fault. */
export function parseXml(text: string): XmlElement {
  if (FORBIDDEN.test(text)) throw new Error(`XML: a character XML 1.0 forbids at ${text.search(FORBIDDEN)}`);
  let at = 0;
  const fail = (why: string): never => {
    throw new Error(`XML: ${why} at offset ${at}: ${JSON.stringify(text.slice(at, at + 40))}`);
  };
  const skipSpace = () => {
    while (at < text.length && /\s/.test(text[at]!)) at++;
  };
  const name = (): string => {
    NAME.lastIndex = at;
    const match = NAME.exec(text);
    if (!match) fail('expected a name');
    at += match![0].length;
    return match![0];
  };
  const decode = (raw: string): string => {
    if (/<|&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)/.test(raw)) fail('a bare < or & in text or an attribute');
    return raw.replace(/&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);/g, (_, entity: string) =>
      entity.startsWith('#x')
        ? String.fromCodePoint(parseInt(entity.slice(2), 16))
        : entity.startsWith('#')
          ? String.fromCodePoint(Number(entity.slice(1)))
          : { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }[entity]!,
    );
  };
  const element = (): XmlElement => {
    if (text[at] !== '<') fail('expected <');
    at++;
    const node: XmlElement = { name: name(), attributes: {}, children: [], text: '' };
    for (;;) {
      skipSpace();
      if (text.startsWith('/>', at)) {
        at += 2;
        return node;
      }
      if (text[at] === '>') {
        at++;
        break;
      }
      const attribute = name();
      if (attribute in node.attributes) fail(`attribute ${attribute} repeated`);
      skipSpace();
      if (text[at] !== '=') fail('expected =');
      at++;
      skipSpace();
      const quote = text[at];
      if (quote !== '"' && quote !== "'") fail('expected a quoted value');
      const end = text.indexOf(quote!, at + 1);
      if (end < 0) fail('unterminated value');
      node.attributes[attribute] = decode(text.slice(at + 1, end));
      at = end + 1;
    }
    for (;;) {
      const next = text.indexOf('<', at);
      if (next < 0) fail(`<${node.name}> never closed`);
      node.text += decode(text.slice(at, next));
      at = next;
      if (text.startsWith('</', at)) {
        at += 2;
        const closing = name();
        if (closing !== node.name) fail(`</${closing}> closes <${node.name}>`);
        skipSpace();
        if (text[at] !== '>') fail('expected >');
        at++;
        return node;
      }
      node.children.push(element());
    }
  };
  if (text.startsWith('<?xml')) {
    const end = text.indexOf('?>');
    if (end < 0) fail('unterminated XML declaration');
    at = end + 2;
  }
  skipSpace();
  const root = element();
  skipSpace();
  if (at !== text.length) fail('content after the root element');
  return root;
}
