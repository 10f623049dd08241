package io.rdma4j.nativeloader.discovery;

import io.rdma4j.nativeloader.NativeCallException;
import io.rdma4j.nativeloader.NativeLibraries;
import io.rdma4j.nativeloader.NativeLibraryUnavailableException;
import io.rdma4j.nativeloader.NativeProbe;

import java.util.Optional;

/**
 * What the native libraries say, for the report: whether they load, and what libibverbs and rdma_cm see.
 *
 * @param libraryProblem why the libraries did not load (with the packages to install), if they did not
 * @param verbs          {@code ibv_get_device_list} outcome (empty when libraries are missing or the call failed)
 * @param rdmaCm         event-channel probe outcome (same)
 * @param callProblem    an unexpected errno from either call
 */
public record NativeStatus(Optional<String> libraryProblem, Optional<NativeProbe.VerbsDevices> verbs,
                           Optional<NativeProbe.RdmaCmStatus> rdmaCm, Optional<String> callProblem) {

    /** Loads the libraries and asks them; never throws for a missing library or "no devices". */
    public static NativeStatus probe() {
        try {
            NativeLibraries.require();
        } catch (NativeLibraryUnavailableException e) {
            return new NativeStatus(Optional.of(e.getMessage()), Optional.empty(), Optional.empty(), Optional.empty());
        }
        try {
            return new NativeStatus(Optional.empty(), Optional.of(NativeProbe.verbsDevices()),
                    Optional.of(NativeProbe.rdmaCm()), Optional.empty());
        } catch (NativeCallException e) {
            return new NativeStatus(Optional.empty(), Optional.empty(), Optional.empty(), Optional.of(e.getMessage()));
        }
    }

    public boolean librariesLoaded() {
        return libraryProblem.isEmpty();
    }

    public String describe() {
        if (libraryProblem.isPresent()) {
            return libraryProblem.get();
        }
        if (callProblem.isPresent()) {
            return NativeLibraries.LIBIBVERBS + " and " + NativeLibraries.LIBRDMACM + " loaded; " + callProblem.get();
        }
        return NativeLibraries.LIBIBVERBS + " and " + NativeLibraries.LIBRDMACM + " loaded; "
                + verbs.orElseThrow().describe() + "; " + rdmaCm.orElseThrow().describe();
    }
}
