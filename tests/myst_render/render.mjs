// Render the markdown cells of Jupyter notebooks the way jupyterlab-myst 2.7.0 does, and report
// what a reader would see. Used by tests/test_myst_render.py.
//
// The pipeline is copied from jupyterlab-myst v2.7.0 (commit 402964a, src/myst.ts):
//   * per cell, `markdownParse`: mystParse with linkify, the default myst-directives/myst-roles
//     plus card, grid, proof, exercise and tabs directives, then `basicTransformationsPlugin`
//     (which lifts roles/directives and joins exercise gates *within the cell only*);
//   * per notebook, `processNotebookMDAST`: the markdown cells' trees as the children of one root,
//     frontmatter from the first markdown cell, then math, glossary, abbreviation, enumerate,
//     links, footnotes, resolveReferences, addCiteChildren and keys, then reconstructHtml.
// The npm packages are the versions jupyterlab-myst 2.7.0's pnpm-lock.yaml resolves
// (package.json pins them, package-lock.json freezes the rest).
// Not reproduced: the JupyterLab link resolver (it only rewrites local link URLs), image
// attachments, and the React rendering itself; `text` below follows what myst-to-react 1.3.0's
// renderers show for each node type (see plainText).
//
// Input (stdin, or the file named by the first argument): JSON {"notebooks": [{"path": str, "cells": [{"cell_type", "source",
// "metadata"}]}]}, i.e. nbformat cells (source as a string or a list of strings).
// Output (stdout): JSON {"notebooks": [{"path", "messages", "cells": [{"index",
// "text", "messages", "problems": [{"kind", "text"}], "inline_expressions", "links"}]}]}, one entry per
// markdown cell; `index` is the cell's index among all the notebook's cells.

import { mystParse } from 'myst-parser';
import { copyNode } from 'myst-common';
import {
  abbreviationPlugin,
  basicTransformationsPlugin,
  DOITransformer,
  enumerateTargetsPlugin,
  footnotesPlugin,
  getFrontmatter,
  GithubTransformer,
  glossaryPlugin,
  keysPlugin,
  linksPlugin,
  mathPlugin,
  reconstructHtmlTransform,
  ReferenceState,
  resolveReferencesPlugin,
  RRIDTransformer,
  updateLinkTextIfEmpty,
  WikiTransformer
} from 'myst-transforms';
import { unified } from 'unified';
import { VFile } from 'vfile';
import { selectAll } from 'unist-util-select';
import { validatePageFrontmatter } from 'myst-frontmatter';
import { cardDirective } from 'myst-ext-card';
import { gridDirectives } from 'myst-ext-grid';
import { tabDirectives } from 'myst-ext-tabs';
import { proofDirective } from 'myst-ext-proof';
import { exerciseDirectives } from 'myst-ext-exercise';
import { readFileSync } from 'node:fs';

// --- jupyterlab-myst src/myst.ts: markdownParse (messages captured, behaviour unchanged) ---
function markdownParse(text, vfile) {
  const parseMyst = content => {
    return mystParse(content, {
      vfile,
      markdownit: { linkify: true },
      directives: [
        cardDirective,
        ...gridDirectives,
        proofDirective,
        ...exerciseDirectives,
        ...tabDirectives
      ],
      roles: []
    });
  };
  const mdast = parseMyst(text);
  unified()
    .use(basicTransformationsPlugin, { parser: parseMyst })
    .runSync(mdast, vfile);
  return mdast;
}

// --- jupyterlab-myst src/transforms/citations.ts ---
function addCiteChildrenTransform(tree) {
  selectAll('cite', tree).forEach(cite => {
    if (cite.children && cite.children.length > 0) {
      return;
    }
    cite.error = true;
    cite.children = [{ type: 'text', value: cite.label }];
  });
}
const addCiteChildrenPlugin = () => tree => {
  addCiteChildrenTransform(tree);
};

// --- jupyterlab-myst src/transforms/links.tsx: internalLinksTransform, the part that does not
// need JupyterLab's resolver (the rest only marks local links as internal / download links) ---
function internalLinksTransform(tree) {
  selectAll('link,linkBlock', tree).forEach(link => {
    if (!link || !link.url) return;
    updateLinkTextIfEmpty(link, link.url);
  });
}

// --- jupyterlab-myst src/myst.ts: processNotebookMDAST ---
function processNotebookMDAST(mdast, file) {
  const linkTransforms = [
    new WikiTransformer(),
    new GithubTransformer(),
    new DOITransformer(),
    new RRIDTransformer()
  ];
  const { frontmatter: frontmatterRaw } = getFrontmatter(file, mdast.children[0]);
  const frontmatter = validatePageFrontmatter(frontmatterRaw, {
    property: 'frontmatter',
    messages: {}
  });
  const state = new ReferenceState('<PATH>', { frontmatter, vfile: file });
  unified()
    .use(mathPlugin, { macros: frontmatter?.math ?? {} })
    .use(glossaryPlugin)
    .use(abbreviationPlugin, { abbreviations: frontmatter.abbreviations })
    .use(enumerateTargetsPlugin, { state })
    .use(linksPlugin, { transformers: linkTransforms })
    .use(footnotesPlugin)
    .use(resolveReferencesPlugin, { state })
    .use(addCiteChildrenPlugin)
    .use(keysPlugin)
    .runSync(mdast, file);
  internalLinksTransform(mdast);
  reconstructHtmlTransform(mdast);
  return mdast;
}

// --- what a reader sees -------------------------------------------------------------------
// Plain text of a rendered cell, following myst-to-react 1.3.0 (DEFAULT_RENDERERS) and
// jupyterlab-myst's inlineExpression renderer, and the problems a reader would notice.
function plainText(node, expressions, problems) {
  const kids = () => (node.children ?? []).map(c => plainText(c, expressions, problems)).join('');
  switch (node.type) {
    case 'text':
    case 'inlineCode':
      return node.value ?? '';
    case 'code':
      return `\n${node.value ?? ''}\n`;
    case 'inlineMath':
    case 'math':
      if (node.error) {
        problems.push({ kind: 'math error', text: `${node.value} (${node.message ?? ''})` });
      }
      return node.type === 'math' ? `\n$$${node.value}$$\n` : `$${node.value}$`;
    case 'break':
      return '\n';
    case 'mystRole':
      // Unknown role: the parser deletes its children and DefaultComponent shows its value.
      problems.push({ kind: 'unknown role', text: `{${node.name}}\`${node.value ?? ''}\`` });
      return node.value ?? '';
    case 'mystRoleError':
      problems.push({ kind: 'role error', text: `{${node.name}}\`${node.value ?? ''}\`` });
      return node.value ?? '';
    case 'mystDirective':
      problems.push({ kind: 'unknown directive', text: `{${node.name}} ${node.args ?? ''}`.trim() });
      return `\n${node.name} - Unknown Directive\n${node.value ?? ''}\n`;
    case 'mystDirectiveError':
      problems.push({ kind: 'directive error', text: `{${node.name}}: ${node.message ?? ''}` });
      return `\n${node.value ?? ''}\n`;
    case 'crossReference':
      if (!node.children || node.children.length === 0) {
        problems.push({
          kind: 'unresolved reference',
          text: node.label || node.identifier || 'No Label'
        });
        return node.label || node.identifier || 'No Label';
      }
      return `${node.prefix ? node.prefix + ' ' : ''}${kids()}${node.suffix ?? ''}`;
    case 'link':
    case 'linkBlock':
      if (node.url?.startsWith('#')) {
        // linksPlugin turns `[](#label)` into a crossReference when the label is in this
        // notebook; what is left points nowhere (JupyterLab just sets the URL hash).
        problems.push({ kind: 'unresolved reference', text: `[${kids()}](${node.url})` });
      }
      return kids();
    case 'cite':
      if (node.error) {
        problems.push({ kind: 'citation not found', text: node.label ?? '' });
      }
      return kids();
    case 'inlineExpression': {
      const found = expressions.find(e => e.expression === node.value);
      const plain = found?.result?.data?.['text/plain'];
      if (found?.result?.status === 'ok' && typeof plain === 'string') {
        return plain.replace(/^(["'])(.*)\1$/, '$2');
      }
      problems.push({
        kind: found ? 'inline expression error' : 'inline expression not evaluated',
        text: `{eval}\`${node.value}\``
      });
      return node.value;
    }
    case 'exercise':
    case 'solution':
      if (node.gate) {
        problems.push({
          kind: 'unjoined gate',
          text: `${node.type} gate=${node.gate}${node.label ? ' label=' + node.label : ''}`
        });
      }
      if (node.hidden) return '';
      return `\n${node.gate ? node.gate + ' of ' : ''}${node.type}${node.enumerator ? ' ' + node.enumerator : ''}: ${kids()}\n`;
    case 'comment':
    case 'mystComment':
      return '';
    case 'paragraph':
    case 'heading':
    case 'listItem':
    case 'admonitionTitle':
    case 'block':
      return `${kids()}\n`;
    default:
      if (!node.children) return node.value ?? '';
      return kids();
  }
}

function sourceOf(cell) {
  return Array.isArray(cell.source) ? cell.source.join('') : (cell.source ?? '');
}

function messageText(m) {
  return `${m.fatal ? 'error' : 'warning'}: ${m.reason ?? m.message}${m.line ? ` (line ${m.line})` : ''}`;
}

function renderNotebook({ path, cells }) {
  const markdown = [];
  cells.forEach((cell, index) => {
    if (cell.cell_type !== 'markdown') return;
    const vfile = new VFile();
    const fragment = markdownParse(sourceOf(cell), vfile);
    fragment.type = 'block';
    markdown.push({ index, cell, fragment, vfile });
  });
  const file = new VFile();
  const out = { path, messages: [], cells: [] };
  if (markdown.length === 0) return out;
  const root = { type: 'root', children: markdown.map(m => copyNode(m.fragment)) };
  const processed = processNotebookMDAST(root, file);
  out.messages = file.messages.map(messageText);
  markdown.forEach((m, i) => {
    const tree = processed.children[i];
    const expressions = m.cell.metadata?.user_expressions ?? [];
    const problems = [];
    const text = plainText(tree, expressions, problems).replace(/\n{3,}/g, '\n\n').trim();
    out.cells.push({
      index: m.index,
      text,
      messages: m.vfile.messages.map(messageText),
      problems,
      inline_expressions: selectAll('inlineExpression', tree).map(n => n.value),
      links: selectAll('link,linkBlock', tree).map(n => n.urlSource ?? n.url)
    });
  });
  return out;
}

async function readStdin() {
  // (readFileSync(0) fails with EAGAIN when stdin is a non-blocking pipe)
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

const input = JSON.parse(process.argv[2] ? readFileSync(process.argv[2], 'utf8') : await readStdin());
const result = { notebooks: input.notebooks.map(renderNotebook) };
process.stdout.write(JSON.stringify(result));
