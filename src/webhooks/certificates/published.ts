import type { ServingMaterial } from '../server.ts';

/** The certificate source has not loaded any material yet (load it before serving). */
export class CertificatesNotLoaded extends Error {
  override readonly name = 'CertificatesNotLoaded';
}

/** The material and subscribers both certificate sources keep; `publish` hands new material out. */
export abstract class PublishedMaterial {
  protected material: ServingMaterial | undefined;
  private readonly listeners = new Set<(material: ServingMaterial) => void>();

  current(): ServingMaterial {
    if (!this.material) throw new CertificatesNotLoaded('load the certificates before serving');
    return this.material;
  }

  subscribe(listener: (material: ServingMaterial) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  protected publish(material: ServingMaterial, notify: boolean): void {
    this.material = material;
    if (notify) for (const listener of this.listeners) listener(material);
  }
}
