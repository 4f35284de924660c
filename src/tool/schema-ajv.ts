/**
 * The one JSON Schema validator setup for tool input schemas (the runtime and the MCP bridge): draft 2020-12, not
 * strict about unknown keywords, and with the standard `format`s checked (email, uri, date-time, uuid, …), so a
 * schema's `format` is enforced rather than ignored.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import formatsModule from 'ajv-formats';

// ajv-formats is CommonJS: under NodeNext its default import is `module.exports`, whose `default` is the plugin.
type FormatsPlugin = (ajv: Ajv2020) => Ajv2020;
const addFormats: FormatsPlugin =
  (formatsModule as unknown as { default?: FormatsPlugin }).default ?? (formatsModule as unknown as FormatsPlugin);

export function createSchemaAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  addFormats(ajv);
  return ajv;
}
