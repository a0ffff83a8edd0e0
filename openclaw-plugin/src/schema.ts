/**
 * The plugin's config schema is the one in `openclaw.plugin.json` (what OpenClaw validates
 * against); this checks a value against the JSON Schema subset that file uses, so a bad value
 * is reported by the plugin too, naming the key.
 */
export type JsonSchema = {
  type?: "object" | "string" | "integer" | "number" | "boolean" | "array";
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean;
  items?: JsonSchema;
  enum?: readonly unknown[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  description?: string;
};

function typeProblem(schema: JsonSchema, value: unknown): string | undefined {
  switch (schema.type) {
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value) ? undefined : "must be an object";
    case "array":
      return Array.isArray(value) ? undefined : "must be an array";
    case "string":
      return typeof value === "string" ? undefined : "must be a string";
    case "boolean":
      return typeof value === "boolean" ? undefined : "must be true or false";
    case "integer":
      return Number.isInteger(value) ? undefined : "must be an integer";
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? undefined : "must be a number";
    default:
      return undefined;
  }
}

function boundProblem(schema: JsonSchema, value: unknown): string | undefined {
  if (schema.enum !== undefined && !schema.enum.includes(value)) {
    return `must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`;
  }
  if (typeof value === "string" && schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) {
    return `must match ${schema.pattern}`;
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) return `must be >= ${schema.minimum}`;
    if (schema.maximum !== undefined && value > schema.maximum) return `must be <= ${schema.maximum}`;
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) {
      return `must be > ${schema.exclusiveMinimum}`;
    }
  }
  return undefined;
}

/** Every problem of `value` against `schema`, as "path: what is wrong". */
export function schemaProblems(schema: JsonSchema, value: unknown, path: string): string[] {
  const problem = typeProblem(schema, value) ?? boundProblem(schema, value);
  if (problem !== undefined) return [`${path}: ${problem} (got ${JSON.stringify(value)})`];
  const problems: string[] = [];
  if (schema.type === "object" && schema.properties !== undefined) {
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      const child = schema.properties[key];
      if (child === undefined) {
        if (schema.additionalProperties === false) problems.push(`${path}.${key}: unknown key`);
        continue;
      }
      problems.push(...schemaProblems(child, item, `${path}.${key}`));
    }
  }
  if (schema.type === "array" && schema.items !== undefined) {
    (value as unknown[]).forEach((item, i) => problems.push(...schemaProblems(schema.items!, item, `${path}[${i}]`)));
  }
  return problems;
}
