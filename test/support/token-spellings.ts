/**
 * Non-canonical spellings of a JWT's signature (issue 37): base64url leaves spare low bits in a last
 * character that carries fewer than 6 bits of data, and decoders ignore them.
 */
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * The same token with its signature's last character changed in the 4 bits a decoder ignores (RS256's
 * 256 and ES256's 64 bytes both end in a 2-character group: 2 bits of data, 4 spare): 15 spellings.
 */
export function otherSpellingsOf(token: string): string[] {
  const last = BASE64URL.indexOf(token.at(-1)!);
  return [...BASE64URL].filter((_char, index) => index >> 4 === last >> 4 && index !== last).map((char) => token.slice(0, -1) + char);
}
