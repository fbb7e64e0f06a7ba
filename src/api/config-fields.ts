import { z } from 'zod';

// Builders of the optional, described fields the Config sections are made of (the descriptions
// become the CRD's documentation).

export const str = (description: string) => z.string().optional().describe(description);
export const bool = (description: string) => z.boolean().optional().describe(description);
export const int = (description: string) => z.int().min(0).optional().describe(description);
export const strings = (description: string) => z.array(z.string()).optional().describe(description);

/** A list that falls back to `fallback` when absent or empty. */
export const stringsOrDefault = (fallback: readonly string[], description: string) =>
  z
    .array(z.string())
    .optional()
    .transform((value) => (value && value.length > 0 ? value : [...fallback]))
    .describe(description);
